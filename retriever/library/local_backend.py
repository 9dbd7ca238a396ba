"""The embedded library backend: documents in `documents.sqlite3`, vectors in `vectors.faiss`,
both under the data directory of the one server that owns it.

The store is the source of truth: the index file is saved a few seconds after a change
(`retriever.library.index_saver`) and rebuilt from the store (`reconcile`) whenever it lags
behind, e.g. after a crash before it was saved. An ingest marks its documents `pending` in the
transaction that stores them and `indexed` in one more once their vectors are searchable.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.library.document_store import DocumentStore
from retriever.library.index_saver import IndexSaver
from retriever.library.reconcile import TextEmbedder, reconcile
from retriever.library.records import ChunkRow, DocumentDraft, Insertion
from retriever.search.index import IndexKind, VectorIndex

logger = logging.getLogger(__name__)
STORE_FILE = "documents.sqlite3"
INDEX_FILE = "vectors.faiss"


class LocalBackend:
    """SQLite store and a FAISS index persisted beside it; callers serialize `add`/`delete`."""

    def __init__(self, data_dir: Path, index_kind: IndexKind, embedder: TextEmbedder) -> None:
        self.data_dir = Path(data_dir)
        self.store = DocumentStore(self.data_dir / STORE_FILE)
        self.index = self._open_index(index_kind, embedder.dim)
        self._saver = IndexSaver(self.index, self._index_path)
        if reconcile(self.store, self.index, embedder).index_changed:
            self._saver.changed()

    def close(self) -> None:
        self._saver.close()
        self.store.close()

    def add(self, drafts: Sequence[DocumentDraft], vectors: np.ndarray) -> list[Insertion]:
        insertions = self.store.add_documents(drafts)
        chunk_ids = [chunk_id for insertion in insertions for chunk_id in insertion.chunk_ids]
        if chunk_ids:
            self.index.add(chunk_ids, vectors[_created_mask(drafts, insertions)])
            self._saver.changed()
        created = [insertion.document.id for insertion in insertions if insertion.created]
        self.store.set_statuses(created, "pending", "indexed")
        return insertions

    def delete(self, doc_id: str, *, project: str | None) -> list[ChunkRow] | None:
        removed = self.store.delete_document(doc_id, project=project)
        if removed:
            self.index.remove(row.id for row in removed)
            self._saver.changed()
        return removed

    @property
    def _index_path(self) -> Path:
        return self.data_dir / INDEX_FILE

    def _open_index(self, kind: IndexKind, dim: int) -> VectorIndex:
        """The saved index if it matches `kind` and `dim`, else an empty one to rebuild."""
        if self._index_path.exists():
            try:
                saved = VectorIndex.load(self._index_path)
            except Exception:
                logger.exception("cannot read %s; rebuilding it from the store", self._index_path)
            else:
                if saved.kind == kind and saved.dim == dim:
                    return saved
                logger.warning(
                    "%s holds a %s index of dim %d, want %s of dim %d; rebuilding it",
                    self._index_path,
                    saved.kind,
                    saved.dim,
                    kind,
                    dim,
                )
        return VectorIndex(dim, kind)


def _created_mask(drafts: Sequence[DocumentDraft], insertions: list[Insertion]) -> np.ndarray:
    """Which embedded chunks belong to documents the store actually created."""
    mask: list[bool] = []
    for draft, insertion in zip(drafts, insertions, strict=True):
        mask += [insertion.created] * len(draft.chunks)
    return np.array(mask, dtype=bool)
