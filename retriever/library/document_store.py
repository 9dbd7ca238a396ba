"""The store of documents and their chunks, on SQLite or on PostgreSQL, with its SQL written once.

Chunk ids are never reused and double as vector ids in the index. The embedded default is one
SQLite file (one connection shared by threads under a lock), which stores documents `pending`
until the local backend has indexed them. On PostgreSQL the store is shared by every replica
(`RAGBLEND_DATABASE_URL`): chunks keep their embedding, documents are stored `indexed` at once,
and every add or delete also logs the change (`retriever.library.changelog`) for the replicas'
indexes. Those differences live in `retriever.library.store_dialect`. The queue of chunk-KV
precompute work over the same tables is `retriever.library.precompute_queue`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.db.postgres import PgDatabase
from retriever.library.documents import MetadataCondition
from retriever.library.drafts import DocumentConflict as DocumentConflict
from retriever.library.drafts import (
    checked_status,
    in_requested_order,
    insert_draft,
    store_drafts,
    vectors_by_draft,
)
from retriever.library.precompute_queue import PrecomputeQueue
from retriever.library.records import (
    CHUNK_IN_PROJECT,
    PROJECT_CHUNKS,
    ChunkRow,
    DocumentDraft,
    DocumentRow,
    DocumentStatus,
    Insertion,
    select_chunks,
    select_document,
    select_documents,
)
from retriever.library.store_dialect import open_dialect
from retriever.search.keywords import keyword_terms


class DocumentStore(PrecomputeQueue):
    """Documents and chunks in the SQLite file at `where`, or in the PostgreSQL database
    `where`, and the queue of their chunks' precompute work; every multi-row change is one
    all-or-nothing transaction."""

    def __init__(self, where: str | Path | PgDatabase) -> None:
        self.path = None if isinstance(where, PgDatabase) else Path(where)
        super().__init__(open_dialect(where))

    def close(self) -> None:
        self._db.close()

    def add_documents(
        self, drafts: Sequence[DocumentDraft], vectors: np.ndarray | None = None
    ) -> list[Insertion]:
        """Store documents, all in one transaction: on SQLite with status 'pending' (the backend
        indexes them); on PostgreSQL with status 'indexed', with their chunks' `vectors` (one
        row per chunk of `drafts`, in order), and the change logged.

        A draft whose content hash is already stored (or earlier in `drafts`) yields the existing
        document with `created=False`. An explicit id taken by other content raises
        `DocumentConflict` and nothing is stored.
        """
        if self._dialect.keeps_vectors and vectors is None:
            raise ValueError("this store keeps the chunks' vectors: pass them")
        kept = vectors_by_draft(drafts, vectors if self._dialect.keeps_vectors else None)
        with self._db.transaction() as connection:
            self._dialect.lock_writes(connection)

            def insert(document: DocumentRow, position: int) -> list[int]:
                return insert_draft(connection, document, drafts[position], kept[position])

            insertions = store_drafts(
                drafts,
                lambda content_hash: select_document(connection, "content_hash = ?", content_hash),
                lambda doc_id: select_document(connection, "id = ?", doc_id),
                insert,
                "indexed" if self._dialect.keeps_vectors else "pending",
            )
            created = [insertion for insertion in insertions if insertion.created]
            if created:
                self._dialect.log_change(
                    connection,
                    "add",
                    [insertion.document.id for insertion in created],
                    [chunk_id for insertion in created for chunk_id in insertion.chunk_ids],
                )
        return insertions

    def find_by_hash(self, content_hash: str) -> DocumentRow | None:
        return self._document("content_hash = ?", content_hash)

    def get_document(self, doc_id: str, *, project: str | None) -> DocumentRow | None:
        """The document `doc_id`; None when unknown or (unless `project` is `EVERY_PROJECT`)
        another project's."""
        if project is None:
            return self._document("id = ?", doc_id)
        with self._db.reading() as connection:
            found = select_documents(connection, "WHERE id = ? AND project = ?", doc_id, project)
        return next(iter(found), None)

    def _document(self, condition: str, value: str) -> DocumentRow | None:
        with self._db.reading() as connection:
            return select_document(connection, condition, value)

    def list_documents(
        self, *, project: str | None, offset: int = 0, limit: int = 100
    ) -> tuple[list[DocumentRow], int]:
        """A page of `project`'s documents (`EVERY_PROJECT`: everyone's), oldest first, and how
        many there are."""
        scope, parameters = ("", ()) if project is None else ("WHERE project = ? ", (project,))
        with self._db.snapshot() as connection:
            total = connection.execute(
                f"SELECT count(*) FROM documents {scope}", parameters
            ).fetchone()
            order = f"{scope}ORDER BY {self._dialect.insertion_order}"
            page = select_documents(
                connection, f"{order} LIMIT ? OFFSET ?", *parameters, limit, offset
            )
        return page, int(total[0]) if total else 0

    def documents_with_status(self, status: DocumentStatus) -> list[DocumentRow]:
        """Documents with `status`, oldest first."""
        with self._db.reading() as connection:
            return select_documents(
                connection, f"WHERE status = ? ORDER BY {self._dialect.insertion_order}", status
            )

    def delete_document(self, doc_id: str, *, project: str | None) -> list[ChunkRow] | None:
        """Delete a document and its chunks (and log it); returns the removed chunks, or None if
        unknown (or, unless `project` is `EVERY_PROJECT`, another project's)."""
        with self._db.transaction() as connection:
            self._dialect.lock_writes(connection)
            found = select_document(connection, "id = ?", doc_id)
            if found is None or project not in (None, found.project):
                return None
            removed = select_chunks(connection, "document_id = ? ORDER BY chunk_index", doc_id)
            connection.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
            connection.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
            self._dialect.log_change(connection, "delete", [doc_id], [row.id for row in removed])
        return removed

    def chunks_for(self, chunk_ids: Sequence[int], *, project: str | None) -> list[ChunkRow]:
        """Chunks by id in the order asked; ids that do not exist (or, unless `project` is
        `EVERY_PROJECT`, are another project's) are skipped."""
        condition, ids = self._dialect.any_of("id", chunk_ids)
        parameters: tuple[object, ...] = (ids,)
        if project is not None:
            condition, parameters = f"{condition} AND {CHUNK_IN_PROJECT}", (ids, project)
        with self._db.reading() as connection:
            rows = select_chunks(connection, condition, *parameters)
        return in_requested_order(rows, chunk_ids)

    def holds_only(self, project: str) -> bool:
        """Whether every stored document is `project`'s (a search then needs no filter). Asked
        as two ranges of the project index, which `<>` would scan whole."""
        with self._db.reading() as connection:
            row = connection.execute(
                "SELECT 1 FROM documents WHERE project < ? OR project > ? LIMIT 1",
                (project, project),
            ).fetchone()
        return row is None

    def keyword_search(
        self,
        query: str,
        limit: int,
        document_ids: Sequence[str] | None = None,
        *,
        project: str | None,
    ) -> list[tuple[int, float]]:
        """Up to `limit` (chunk id, score) pairs of chunks holding any word of `query`, best
        first, within `document_ids` when given and `project`'s chunks (`EVERY_PROJECT`: every
        project's, for a library that holds one) (`retriever.search.keywords`); none for a
        query without words."""
        terms = keyword_terms(query)
        if not terms:
            return []
        with self._db.reading() as connection:
            return self._dialect.keyword_search(connection, terms, limit, document_ids, project)

    def chunk_ids(
        self, document_ids: Sequence[str] | None = None, *, project: str | None
    ) -> set[int]:
        """Ids of `project`'s chunks (`EVERY_PROJECT`: everyone's), or of those of the given
        documents."""
        condition, parameters = "1 = 1", ()
        if document_ids is not None:
            condition, ids = self._dialect.any_of("document_id", document_ids)
            parameters = (ids,)
        if project is not None:
            condition, parameters = f"{condition} AND {PROJECT_CHUNKS}", (*parameters, project)
        with self._db.reading() as connection:
            rows = connection.execute(
                f"SELECT id FROM chunks WHERE {condition}", parameters
            ).fetchall()
        return {int(row[0]) for row in rows}

    def documents_where(
        self, condition: MetadataCondition, project: str, document_ids: Sequence[str] | None
    ) -> list[str]:
        """Ids of `project`'s documents (only those of `document_ids` when given) whose metadata
        passes `condition`, checked here on each one's metadata."""
        clause, parameters = "project = ?", [project]
        if document_ids is not None:
            among, ids = self._dialect.any_of("id", document_ids)
            clause, parameters = f"{clause} AND {among}", [project, ids]
        with self._db.reading() as connection:
            rows = connection.execute(
                f"SELECT id, metadata FROM documents WHERE {clause}", parameters
            ).fetchall()
        return [doc_id for doc_id, metadata in rows if condition(json.loads(metadata))]

    def set_status(self, doc_id: str, status: DocumentStatus) -> bool:
        """Set a document's status; False if the document does not exist."""
        with self._db.transaction() as connection:
            cursor = connection.execute(
                "UPDATE documents SET status = ? WHERE id = ?", (checked_status(status), doc_id)
            )
        return cursor.rowcount == 1

    def set_statuses(
        self, doc_ids: Sequence[str], current: DocumentStatus, status: DocumentStatus
    ) -> None:
        """Set `status` on those of `doc_ids` whose status is `current`, in one transaction."""
        if not doc_ids:
            return
        among, ids = self._dialect.any_of("id", doc_ids)
        with self._db.transaction() as connection:
            connection.execute(
                f"UPDATE documents SET status = ? WHERE status = ? AND {among}",
                (checked_status(status), current, ids),
            )
