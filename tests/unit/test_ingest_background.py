"""What an ingest leaves to the background: the index file, written within seconds rather than
on every ingest, and the chunks' KV precompute, which waits while documents are being ingested."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from retriever.ingest.chunks import Chunk
from retriever.library.document_store import DocumentStore
from retriever.library.index_saver import IndexSaver
from retriever.library.records import DocumentDraft
from retriever.search.index import VectorIndex
from tests.unit.tenants import DEFAULT

DIM = 4


def _vectors(count: int) -> np.ndarray:
    vectors = np.random.default_rng(0).standard_normal((count, DIM), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _eventually(condition: Any, within_s: float = 30) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_index_file_follows_changes_without_a_close(tmp_path: Path) -> None:
    index, path = VectorIndex(DIM), tmp_path / "vectors.faiss"
    saver = IndexSaver(index, path, interval_s=0.05)
    index.add([1, 2], _vectors(2))
    saver.changed()
    assert _eventually(lambda: path.exists() and VectorIndex.load(path).ids() == {1, 2})
    index.remove([1])
    saver.changed()
    assert _eventually(lambda: VectorIndex.load(path).ids() == {2})
    saver.close()


def test_closing_writes_the_last_changes(tmp_path: Path) -> None:
    index, path = VectorIndex(DIM), tmp_path / "vectors.faiss"
    saver = IndexSaver(index, path, interval_s=3600)
    index.add([7, 8, 9], _vectors(3))
    saver.changed()
    saver.close()
    assert VectorIndex.load(path).ids() == {7, 8, 9}


def test_a_failed_write_is_tried_again(tmp_path: Path) -> None:
    index, path = VectorIndex(DIM), tmp_path / "vectors.faiss"
    path.mkdir()  # a folder where the file goes: every write fails until it is gone
    saver = IndexSaver(index, path, interval_s=0.05)
    index.add([1], _vectors(1))
    saver.changed()
    time.sleep(0.2)
    path.rmdir()
    assert _eventually(lambda: path.exists() and VectorIndex.load(path).ids() == {1})
    saver.close()


class _Library:
    def __init__(self, store: DocumentStore) -> None:
        self.store = store


class _ChunkCache:
    """Records the chunks precomputed; stores nothing."""

    def __init__(self) -> None:
        self.precomputed: list[list[int]] = []

    async def precompute(self, token_ids: list[int], context: Any, **options: Any) -> None:
        self.precomputed.append(token_ids)


def _indexed_store(tmp_path: Path) -> DocumentStore:
    store = DocumentStore(tmp_path / "documents.sqlite3")
    chunks = [Chunk("one", [1], 0, 3), Chunk(" two", [2], 3, 7)]
    [stored] = store.add_documents([DocumentDraft("doc", "hash", {}, 7, chunks, "default")])
    store.set_statuses([stored.document.id], "pending", "indexed")
    return store


async def test_chunk_precompute_waits_until_no_ingest_is_running(tmp_path: Path) -> None:
    from gateway.rag.precompute import Precomputer

    store = _indexed_store(tmp_path)
    chunk_cache = _ChunkCache()
    ingesting = True
    precomputer = Precomputer(
        _Library(store), chunk_cache, None, lambda project: DEFAULT, lambda: ingesting
    )  # type: ignore[arg-type]
    precomputer.start()
    await asyncio.sleep(0.5)
    assert chunk_cache.precomputed == []
    ingesting = False
    for _ in range(300):
        if len(chunk_cache.precomputed) == 2:
            break
        await asyncio.sleep(0.05)
    await precomputer.stop()
    assert sorted(chunk_cache.precomputed) == [[1], [2]]
    assert store.progress()[1] == 0
    store.close()
