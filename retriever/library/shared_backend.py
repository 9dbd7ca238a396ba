"""The shared library backend: PostgreSQL is the store of record for every replica, and each
replica's FAISS index lives in memory, built from the database and kept in step by its
`IndexFollower`. Writes apply their own change to this replica's index right after commit."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np

from retriever.db.postgres import PgDatabase
from retriever.library.document_store import DocumentStore
from retriever.library.interfaces import LibraryUnavailable
from retriever.library.records import ChunkRow, DocumentDraft, Insertion
from retriever.search.index import IndexKind, VectorIndex
from retriever.search.index_follower import IndexFollower


class SharedBackend:
    """Opens (and if need be creates) the library at `url` and starts following it. With the
    database down it opens anyway: every library call raises `LibraryUnavailable` until the
    database is back and the follower has built the index."""

    def __init__(self, url: str, index_kind: IndexKind, dim: int) -> None:
        database = PgDatabase(url)
        self.store = DocumentStore(database)
        self.follower = IndexFollower(database, index_kind, dim)
        try:
            self.follower.catch_up()
        except LibraryUnavailable:
            pass  # logged by the database; the follower builds the index once it is back
        except BaseException:
            database.close()
            raise
        self.follower.start()

    @property
    def index(self) -> VectorIndex:
        return self.follower.index

    def close(self) -> None:
        self.follower.stop()
        self.store.close()

    def add(self, drafts: Sequence[DocumentDraft], vectors: np.ndarray) -> list[Insertion]:
        insertions = self.store.add_documents(drafts, vectors)
        self._catch_up_after_commit()
        return insertions

    def delete(self, doc_id: str, *, project: str | None) -> list[ChunkRow] | None:
        removed = self.store.delete_document(doc_id, project=project)
        if removed is not None:
            self._catch_up_after_commit()
        return removed

    def _catch_up_after_commit(self) -> None:
        """Read-your-writes on this replica. Should the database drop right after the commit,
        the change is still stored and the follower applies it once the database is back."""
        with contextlib.suppress(LibraryUnavailable):
            self.follower.catch_up()
