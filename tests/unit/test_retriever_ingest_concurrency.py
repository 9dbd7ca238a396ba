"""Ingest embeds outside the library's write lock: a large batch does not hold up other writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from retriever import EVERY_PROJECT
from retriever.library.documents import IngestResult, NewDocument
from retriever.library.facade import Library
from retriever.search.embed import Embedder, FairLock
from tests.unit.tenants import DEFAULT
from tests.unit.test_retriever_library import BREAD, CHUNK_TOKENS, PLANTS, TOKENIZER_DIR, TOWER

WAIT_SECONDS = 120  # only bounds a failing test; passing runs never wait this long


class GatedEmbedder:
    """The real MiniLM embedder that stops, before a batch holding `marker`, until released."""

    def __init__(self, embedder: Embedder, marker: str) -> None:
        self.embedder = embedder
        self.marker = marker
        self.reached = threading.Event()
        self.released = threading.Event()

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if any(self.marker in text for text in texts):
            self.reached.set()
            self.released.wait(WAIT_SECONDS)
        return self.embedder.embed(texts, batch_size)


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture
def gated(tmp_path: Path, tokenizer) -> tuple[Library, GatedEmbedder]:
    embedder = GatedEmbedder(Embedder(), marker="Eiffel")
    library = Library(tmp_path / "library", tokenizer, embedder, "flat", CHUNK_TOKENS)
    yield library, embedder
    embedder.released.set()
    library.close()


def in_thread(action: Callable[[], list[IngestResult]]) -> tuple[threading.Thread, list]:
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(action()), daemon=True)
    thread.start()
    return thread, outcome


def test_a_small_ingest_completes_while_a_large_one_is_embedding(gated) -> None:
    library, embedder = gated
    large, large_outcome = in_thread(
        lambda: library.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    )
    assert embedder.reached.wait(WAIT_SECONDS)
    small, small_outcome = in_thread(
        lambda: library.ingest([NewDocument("bread", BREAD)], tenant=DEFAULT)
    )
    small.join(WAIT_SECONDS)
    assert [(r.id, r.created, r.status) for r in small_outcome[0]] == [("bread", True, "indexed")]
    assert library.get("tower", tenant=DEFAULT) is None  # still embedding, nothing of it stored yet
    assert library.search("sourdough starter", top_k=1, tenant=DEFAULT)[0].document_id == "bread"
    embedder.released.set()
    large.join(WAIT_SECONDS)
    assert large_outcome[0][0].created
    assert library.index.ids() == library.store.chunk_ids(project=EVERY_PROJECT)
    assert (
        library.search("How tall is the Eiffel Tower?", top_k=1, tenant=DEFAULT)[0].document_id
        == "tower"
    )


def test_content_deleted_while_a_duplicate_is_prepared_is_stored_again(gated) -> None:
    library, embedder = gated
    library.ingest([NewDocument("plants", PLANTS)], tenant=DEFAULT)
    batch = [NewDocument("tower", TOWER), NewDocument("plants-copy", PLANTS)]
    ingest, outcome = in_thread(lambda: library.ingest(batch, tenant=DEFAULT))
    assert embedder.reached.wait(WAIT_SECONDS)
    assert [row.chunk_index for row in library.delete("plants", tenant=DEFAULT)] == [0]
    embedder.released.set()
    ingest.join(WAIT_SECONDS)
    copy = outcome[0][1]
    assert (copy.id, copy.created, copy.status) == ("plants-copy", True, "indexed")
    assert copy.num_chunks == 1
    hit = library.search("Which gas do plants give off?", top_k=1, tenant=DEFAULT)[0]
    assert (hit.document_id, hit.chunk_index) == ("plants-copy", 0)
    assert library.index.ids() == library.store.chunk_ids(project=EVERY_PROJECT)


def test_the_embedder_lock_goes_to_a_waiter_before_its_holder_takes_it_again() -> None:
    """A thread embedding batch after batch must let a waiting query in at its next release
    (`threading.Lock` lets the releasing thread take it straight back, often for rounds)."""
    lock = FairLock()
    rounds, waiter_turns = 6, []
    first_round = threading.Event()
    done_rounds = 0

    def embed_batches() -> None:
        nonlocal done_rounds
        for _ in range(rounds):
            with lock:
                first_round.set()
                threading.Event().wait(0.2)  # a batch: holds the lock, not the GIL
                done_rounds += 1

    def query() -> None:
        with lock:
            waiter_turns.append(done_rounds)

    holder = threading.Thread(target=embed_batches)
    holder.start()
    first_round.wait()
    waiting = threading.Thread(target=query)
    waiting.start()
    waiting.join()
    holder.join()
    assert waiter_turns == [1]
