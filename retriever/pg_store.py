"""The document store on PostgreSQL, shared by every replica (`RAGBLEND_DATABASE_URL`).

The same rows as `retriever.store` (SQLite) plus each chunk's embedding; every add or delete
is one transaction that also logs the change (`retriever.changelog`) for the replicas' indexes.
Documents are stored `indexed` at once: their vectors are committed with them. Precompute work
is handed out with row locks and a lease (`claim_pending_chunks`), so each chunk's KV is computed
by one replica, and the claims of a replica that died expire.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from retriever import changelog, kv_presence
from retriever.pg_database import PgDatabase, QmarkConnection
from retriever.records import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    ChunkRow,
    DocumentDraft,
    DocumentRow,
    DocumentStatus,
    Insertion,
    chunk_from_row,
    document_from_row,
    document_values,
    encode_token_ids,
)
from retriever.store_common import (
    PENDING,
    REQUEUEABLE,
    checked_status,
    in_requested_order,
    store_drafts,
)

CLAIM_LEASE_S = 120
"""How long a replica's claim on a chunk to precompute lasts; after that another may take it."""


class PgDocumentStore:
    """Documents, chunks, embeddings and the change log in one PostgreSQL database."""

    def __init__(self, database: PgDatabase) -> None:
        self._db = database
        self.claimant = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """Who this replica is in `claimed_by`."""

    def close(self) -> None:
        self._db.close()

    def add_documents(
        self, drafts: Sequence[DocumentDraft], vectors: np.ndarray
    ) -> list[Insertion]:
        """Store documents (status 'indexed') with their chunks' `vectors` (one row per chunk of
        `drafts`, in order) and log the change, all in one transaction."""
        starts = np.cumsum([0] + [len(draft.chunks) for draft in drafts])
        with self._db.transaction() as connection:
            changelog.lock_writes(connection)

            def insert(document: DocumentRow, position: int) -> list[int]:
                chunk_vectors = vectors[starts[position] : starts[position + 1]]
                return _insert(connection, document, drafts[position], chunk_vectors)

            insertions = store_drafts(
                drafts,
                lambda content_hash: _document(connection, "content_hash = %s", content_hash),
                lambda doc_id: _document(connection, "id = %s", doc_id),
                insert,
                "indexed",
            )
            created = [insertion for insertion in insertions if insertion.created]
            if created:
                changelog.record(
                    connection,
                    "add",
                    [insertion.document.id for insertion in created],
                    [chunk_id for insertion in created for chunk_id in insertion.chunk_ids],
                )
        return insertions

    def delete_document(self, doc_id: str) -> list[ChunkRow] | None:
        """Delete a document and its chunks and log it; the removed chunks, or None."""
        with self._db.transaction() as connection:
            changelog.lock_writes(connection)
            if _document(connection, "id = %s", doc_id) is None:
                return None
            removed = _chunks(connection, "document_id = %s ORDER BY chunk_index", (doc_id,))
            connection.execute("DELETE FROM documents WHERE id = %s", (doc_id,))
            changelog.record(connection, "delete", [doc_id], [row.id for row in removed])
        return removed

    def find_by_hash(self, content_hash: str) -> DocumentRow | None:
        with self._db.reading() as connection:
            return _document(connection, "content_hash = %s", content_hash)

    def get_document(self, doc_id: str) -> DocumentRow | None:
        with self._db.reading() as connection:
            return _document(connection, "id = %s", doc_id)

    def list_documents(self, offset: int = 0, limit: int = 100) -> tuple[list[DocumentRow], int]:
        """A page of documents, oldest first, and the total number of documents."""
        with self._db.snapshot() as connection:
            total = connection.execute("SELECT count(*) FROM documents").fetchone()
            rows = connection.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents ORDER BY position LIMIT %s OFFSET %s",
                (limit, offset),
            ).fetchall()
        return [document_from_row(row) for row in rows], int(total[0]) if total else 0

    def chunks_for(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        """Chunks by id in the order asked; ids that do not exist are skipped."""
        with self._db.reading() as connection:
            rows = _chunks(connection, "id = ANY(%s)", (list(chunk_ids),))
        return in_requested_order(rows, chunk_ids)

    def chunk_ids(self, document_ids: Sequence[str] | None = None) -> set[int]:
        """Ids of all chunks, or of the chunks of the given documents."""
        with self._db.reading() as connection:
            if document_ids is None:
                rows = connection.execute("SELECT id FROM chunks").fetchall()
            else:
                rows = connection.execute(
                    "SELECT id FROM chunks WHERE document_id = ANY(%s)", (list(document_ids),)
                ).fetchall()
        return {int(row[0]) for row in rows}

    def set_status(self, doc_id: str, status: DocumentStatus) -> bool:
        with self._db.transaction() as connection:
            cursor = connection.execute(
                "UPDATE documents SET status = %s WHERE id = %s", (checked_status(status), doc_id)
            )
        return cursor.rowcount == 1

    def mark_chunk_cached(self, chunk_id: int, kv_key: str | None) -> bool:
        """Record a chunk's precomputed KV (see `DocumentStore.mark_chunk_cached`); its claim
        ends."""
        with self._db.transaction() as connection:
            row = connection.execute(
                "UPDATE chunks SET kv_cached = 1, kv_key = %s, kv_present = %s, kv_stale = 0, "
                "claimed_by = NULL, claimed_until = NULL WHERE id = %s RETURNING document_id",
                (kv_key, int(kv_key is not None), chunk_id),
            ).fetchone()
            if row is not None:
                kv_presence.refresh_status(QmarkConnection(connection), [row[0]])
        return row is not None

    def progress(self) -> tuple[dict[str, int], int]:
        with self._db.snapshot() as connection:
            return kv_presence.progress(QmarkConnection(connection))

    def apply_kv_presence(self, present: Iterable[str], evicted: Iterable[str]) -> list[str]:
        with self._db.transaction() as connection:
            shared = QmarkConnection(connection)
            documents = kv_presence.set_presence(shared, present, True)
            documents |= kv_presence.set_presence(shared, evicted, False)
            return kv_presence.refresh_status(shared, sorted(documents))

    def claim_pending_chunks(self, limit: int) -> list[ChunkRow]:
        """Up to `limit` chunks of indexed documents still to precompute, then stale ones (see
        `requeue_chunks`), that no replica holds a live claim on, oldest first, now claimed by
        this one for `CLAIM_LEASE_S`."""
        with self._db.transaction() as connection:
            rows = connection.execute(
                f"UPDATE chunks SET claimed_by = %s, "
                f"claimed_until = now() + make_interval(secs => %s) WHERE id IN ("
                f"SELECT id FROM chunks WHERE ({PENDING} OR kv_stale = 1) "
                "AND (claimed_until IS NULL OR claimed_until < now()) "
                "ORDER BY kv_stale, id LIMIT %s FOR UPDATE SKIP LOCKED) "
                f"RETURNING {CHUNK_COLUMNS}, kv_stale",
                (self.claimant, CLAIM_LEASE_S, limit),
            ).fetchall()
        ordered = sorted(rows, key=lambda row: (row[-1], row[0]))
        return [chunk_from_row(row[:-1]) for row in ordered]

    def requeue_chunks(self, chunk_ids: Sequence[int]) -> list[int]:
        """Mark chunks stale (see `DocumentStore.requeue_chunks`); any replica may claim them."""
        with self._db.transaction() as connection:
            rows = connection.execute(
                f"UPDATE chunks SET kv_stale = 1 WHERE {REQUEUEABLE} AND id = ANY(%s) RETURNING id",
                (list(chunk_ids),),
            ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def cancel_requeue(self, chunk_id: int) -> None:
        """A stale chunk could not be precomputed again: it keeps the KV it has; its claim ends."""
        with self._db.transaction() as connection:
            connection.execute(
                "UPDATE chunks SET kv_stale = 0, claimed_by = NULL, claimed_until = NULL "
                "WHERE id = %s",
                (chunk_id,),
            )


def _document(connection: psycopg.Connection, condition: str, value: Any) -> DocumentRow | None:
    row = connection.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE {condition}", (value,)
    ).fetchone()
    return None if row is None else document_from_row(row)


def _chunks(
    connection: psycopg.Connection, condition: str, parameters: tuple[Any, ...]
) -> list[ChunkRow]:
    rows = connection.execute(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE {condition}", parameters
    ).fetchall()
    return [chunk_from_row(row) for row in rows]


def _insert(
    connection: psycopg.Connection,
    document: DocumentRow,
    draft: DocumentDraft,
    vectors: np.ndarray,
) -> list[int]:
    connection.execute(
        f"INSERT INTO documents ({DOCUMENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        document_values(document),
    )
    chunk_ids: list[int] = []
    for index, (chunk, vector) in enumerate(zip(draft.chunks, vectors, strict=True)):
        row = connection.execute(
            "INSERT INTO chunks (document_id, chunk_index, text, token_ids, embedding) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (
                document.id,
                index,
                chunk.text,
                encode_token_ids(chunk.token_ids),
                changelog.encode_vector(vector),
            ),
        ).fetchone()
        assert row is not None
        chunk_ids.append(int(row[0]))
    return chunk_ids
