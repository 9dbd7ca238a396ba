"""What the library and the gateway's background loops need from a document store, whichever
database holds it (`retriever.library.document_store`: the embedded SQLite file or the PostgreSQL
database shared by replicas); and how an unreachable database shows (`LibraryUnavailable`,
`OutageLog`). Adding and deleting documents is the backend's job, because it also moves the
vector index (`retriever.library.local_backend`, `retriever.library.shared_backend`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from retriever.library.documents import MetadataCondition
from retriever.library.records import (
    ChunkRow,
    DocumentDraft,
    DocumentRow,
    DocumentStatus,
    Insertion,
)

if TYPE_CHECKING:  # the gateway imports `LibraryUnavailable` without the retrieval extras
    import numpy as np

    from retriever.search.index import VectorIndex


EVERY_PROJECT: Final = None
"""The `project` of a store call that spans every tenant: background maintenance (reconciling
the index, precomputing, neighbour requeues), never a request. The stores take `project` by
keyword with no default, so reading across tenants is always written out."""


class LibraryUnavailable(RuntimeError):
    """The shared library's database cannot be reached; retry once it is back.

    The message starts with "document library unavailable:" and says why.
    """


class OutageLog:
    """One warning when the library's database becomes unreachable and one when it is back, for
    background loops that retry every few seconds: call `failed(error)` on every failed attempt
    and `succeeded()` on every good one."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.down = False

    def failed(self, error: BaseException) -> None:
        if not self.down:
            self.down = True
            self.logger.warning("%s paused, retrying until it is back: %s", self.what, error)

    def succeeded(self) -> None:
        if self.down:
            self.down = False
            self.logger.warning("%s resumed: the document library is reachable again", self.what)


class LibraryStore(Protocol):
    def close(self) -> None: ...

    def find_by_hash(self, content_hash: str) -> DocumentRow | None: ...

    def get_document(self, doc_id: str, *, project: str | None) -> DocumentRow | None: ...

    def list_documents(
        self, *, project: str | None, offset: int = 0, limit: int = 100
    ) -> tuple[list[DocumentRow], int]: ...

    def chunks_for(self, chunk_ids: Sequence[int], *, project: str | None) -> list[ChunkRow]: ...

    def holds_only(self, project: str) -> bool: ...

    def chunk_ids(
        self, document_ids: Sequence[str] | None = None, *, project: str | None
    ) -> set[int]: ...

    def documents_where(
        self, condition: MetadataCondition, project: str, document_ids: Sequence[str] | None
    ) -> list[str]: ...

    def keyword_search(
        self,
        query: str,
        limit: int,
        document_ids: Sequence[str] | None = None,
        *,
        project: str | None,
    ) -> list[tuple[int, float]]: ...

    def set_status(self, doc_id: str, status: DocumentStatus) -> bool: ...

    def set_statuses(
        self, doc_ids: Sequence[str], current: DocumentStatus, status: DocumentStatus
    ) -> None: ...

    def mark_chunk_cached(self, chunk_id: int, kv_key: str | None) -> bool: ...

    def progress(self) -> tuple[dict[str, int], int]: ...

    def apply_kv_presence(self, present: Iterable[str], evicted: Iterable[str]) -> list[str]: ...

    def claim_pending_chunks(self, limit: int) -> list[ChunkRow]:
        """Up to `limit` chunks whose KV is still to be precomputed, each handed to one caller
        across every server sharing the store: first those never precomputed, then stale ones
        (`kv_cached` true: their stored KV is to be replaced)."""
        ...

    def requeue_chunks(self, chunk_ids: Sequence[int]) -> list[int]:
        """Mark chunks stale, to be precomputed again (their nearest neighbours changed); only
        chunks whose KV is stored and present, and not already stale. They stay cached meanwhile.
        Returns the ids marked now."""
        ...

    def cancel_requeue(self, chunk_id: int) -> None:
        """A stale chunk could not be precomputed again: it keeps the KV it has."""
        ...


class LibraryBackend(Protocol):
    """A store and the vector index kept in step with it."""

    store: LibraryStore
    index: VectorIndex

    def add(self, drafts: Sequence[DocumentDraft], vectors: np.ndarray) -> list[Insertion]:
        """Store the drafts (one transaction) and index the chunks of those created; `vectors`
        holds one row per chunk of `drafts`, in order. Raises `DuplicateVanished` when a draft
        prepared as a copy lost its original meanwhile (nothing is stored then)."""
        ...

    def delete(self, doc_id: str, *, project: str | None) -> list[ChunkRow] | None:
        """Delete a document and its vectors; its chunks, or None if it is unknown (or, unless
        `project` is `EVERY_PROJECT`, another project's)."""
        ...

    def close(self) -> None: ...
