"""The document store's queue of chunk-KV precompute work, and the KV state it leaves behind.

Chunks of indexed documents wait for their KV to be precomputed; chunks whose neighbours changed
are marked stale to be precomputed again. On PostgreSQL each waiting chunk is handed to one
replica at a time, with row locks and a lease (`retriever.library.store_dialect`); with one
server per SQLite file there is no one to share it with. Once precomputed, a chunk's KV is
tracked as present or evicted from what the engine reports, and its document's status follows
(`retriever.library.kv_presence`). `DocumentStore` is this queue over its database.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence

from retriever.library import kv_presence
from retriever.library.records import ChunkRow, chunk_from_row, select_chunks
from retriever.library.store_dialect import StoreDialect

PENDING = "(kv_cached = 0 AND document_id IN (SELECT id FROM documents WHERE status = 'indexed'))"
"""Chunks of indexed documents whose KV was never precomputed."""
REQUEUEABLE = "kv_cached = 1 AND kv_key IS NOT NULL AND kv_present = 1 AND kv_stale = 0"
"""Chunks that may be marked stale: their KV is stored and present, and not already stale."""


class PrecomputeQueue:
    """Chunks awaiting precompute, claims on them, and their KV's presence, in the database of
    `dialect`; every change is one transaction."""

    def __init__(self, dialect: StoreDialect) -> None:
        self._dialect = dialect
        self._db = dialect.database
        # Who this server is in `claimed_by` (PostgreSQL).
        self.claimant = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def mark_chunk_cached(self, chunk_id: int, kv_key: str | None) -> bool:
        """Record that a chunk's KV was precomputed, stored under ``kv_key`` (None: it could not
        be); False if the chunk does not exist. Its document turns ``cached`` with its last chunk.
        A claim on it ends."""
        with self._db.transaction() as connection:
            row = connection.execute(
                "UPDATE chunks SET kv_cached = 1, kv_key = ?, kv_present = ?, kv_stale = 0"
                f"{self._dialect.release_claim} WHERE id = ? RETURNING document_id",
                (kv_key, int(kv_key is not None), chunk_id),
            ).fetchone()
            if row is not None:
                kv_presence.refresh_status(connection, [row[0]])
        return row is not None

    def progress(self) -> tuple[dict[str, int], int]:
        """Documents per status, and chunks still waiting for their KV to be precomputed."""
        with self._db.snapshot() as connection:
            return kv_presence.progress(connection)

    def apply_kv_presence(self, present: Iterable[str], evicted: Iterable[str]) -> list[str]:
        """Chunks the engine reports stored (``present``) or evicted, by chunk-store key; updates
        their documents' status and returns the documents that turned ``cached``."""
        with self._db.transaction() as connection:
            documents = kv_presence.set_presence(connection, present, True)
            documents |= kv_presence.set_presence(connection, evicted, False)
            return kv_presence.refresh_status(connection, sorted(documents))

    def pending_chunks(self, limit: int) -> list[ChunkRow]:
        """Up to `limit` chunks of indexed documents whose KV cache is not stored yet, oldest first.
        Documents still being ingested are left out: a document turns `cached` after `indexed`."""
        with self._db.reading() as connection:
            return select_chunks(connection, f"{PENDING} ORDER BY id LIMIT ?", limit)

    def claim_pending_chunks(self, limit: int) -> list[ChunkRow]:
        """`pending_chunks`, then stale ones (see `requeue_chunks`), each handed to one caller:
        on PostgreSQL those no replica holds a live claim on, now claimed by this one for
        `CLAIM_LEASE_S`; with one server per SQLite file there is no one to share them with."""
        with self._db.transaction() as connection:
            condition = f"{PENDING} OR kv_stale = 1"
            rows = self._dialect.claim(connection, condition, limit, self.claimant)
        ordered = sorted(rows, key=lambda row: (row[-1], row[0]))
        return [chunk_from_row(row[:-1]) for row in ordered]

    def requeue_chunks(self, chunk_ids: Sequence[int]) -> list[int]:
        """Mark chunks stale: their KV is to be precomputed again (their neighbours changed); any
        replica may claim them.

        Only chunks whose KV is stored and present are marked, and only once until it is
        precomputed again; they stay cached meanwhile. Returns the ids marked now."""
        condition, ids = self._dialect.any_of("id", chunk_ids)
        with self._db.transaction() as connection:
            rows = connection.execute(
                f"UPDATE chunks SET kv_stale = 1 WHERE {REQUEUEABLE} AND {condition} RETURNING id",
                (ids,),
            ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def cancel_requeue(self, chunk_id: int) -> None:
        """A stale chunk could not be precomputed again: it keeps the KV it has; its claim ends."""
        with self._db.transaction() as connection:
            connection.execute(
                f"UPDATE chunks SET kv_stale = 0{self._dialect.release_claim} WHERE id = ?",
                (chunk_id,),
            )

    def pending_chunks_of(self, document_id: str) -> list[ChunkRow]:
        """The chunks of one document whose KV cache is not stored yet, in chunk order."""
        with self._db.reading() as connection:
            return select_chunks(
                connection, "kv_cached = 0 AND document_id = ? ORDER BY chunk_index", document_id
            )
