"""Bring the vector index back in line with the document store after a crash or a rebuild.

The store is the source of truth: a chunk row without a vector is embedded again, a vector without
a chunk row is removed, and documents left 'pending' become 'indexed' once all their vectors exist.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retriever.library.document_store import DocumentStore
from retriever.library.interfaces import EVERY_PROJECT
from retriever.search.index import VectorIndex

logger = logging.getLogger(__name__)
REEMBED_BATCH = 256


class TextEmbedder(Protocol):
    """What the library needs from an embedder (`retriever.search.embed.Embedder` in production)."""

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str], batch_size: int = ...) -> np.ndarray: ...


@dataclass(frozen=True)
class Reconciliation:
    """Counts of what `reconcile` changed."""

    vectors_added: int
    vectors_removed: int
    documents_indexed: int

    @property
    def index_changed(self) -> bool:
        return bool(self.vectors_added or self.vectors_removed)


def reconcile(store: DocumentStore, index: VectorIndex, embedder: TextEmbedder) -> Reconciliation:
    """Make `index` hold exactly one vector per stored chunk; mark pending documents indexed."""
    stored_ids = store.chunk_ids(project=EVERY_PROJECT)
    indexed_ids = index.ids()
    removed = index.remove(indexed_ids - stored_ids)
    missing = sorted(stored_ids - indexed_ids)
    for start in range(0, len(missing), REEMBED_BATCH):
        rows = store.chunks_for(missing[start : start + REEMBED_BATCH], project=EVERY_PROJECT)
        index.add([row.id for row in rows], embedder.embed([row.text for row in rows]))
    pending = store.documents_with_status("pending")
    store.set_statuses([document.id for document in pending], "pending", "indexed")
    result = Reconciliation(len(missing), removed, len(pending))
    if result.index_changed or pending:
        logger.warning("reconciled the vector index with the document store: %s", result)
    return result
