"""SQLite store of documents and their chunks (one connection shared by threads under a lock).

Chunk ids are AUTOINCREMENT keys, never reused, and double as vector ids in the index. The
embedded default; `retriever.pg_store` is the same store on PostgreSQL, shared by replicas.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from retriever import kv_presence
from retriever.chunking import Chunk
from retriever.object_db import ObjectDatabase
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
from retriever.store_common import DocumentConflict as DocumentConflict


class DocumentStore:
    """Documents and chunks; every multi-row change is one all-or-nothing transaction."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = ObjectDatabase(self.path)

    def close(self) -> None:
        self._db.close()

    def add_document(
        self,
        doc_id: str | None,
        content_hash: str,
        metadata: dict[str, Any],
        chunks: list[Chunk],
        num_chars: int,
    ) -> Insertion:
        """Store one document (see `add_documents`)."""
        draft = DocumentDraft(doc_id, content_hash, metadata, num_chars, chunks)
        return self.add_documents([draft])[0]

    def add_documents(self, drafts: Sequence[DocumentDraft]) -> list[Insertion]:
        """Store documents with status 'pending', all in one transaction.

        A draft whose content hash is already stored (or earlier in `drafts`) yields the existing
        document with `created=False`. An explicit id taken by other content raises
        `DocumentConflict` and nothing is stored.
        """
        with self._db.transaction() as connection:

            def insert(document: DocumentRow, position: int) -> list[int]:
                return self._insert(connection, document, drafts[position].chunks)

            return store_drafts(drafts, self.find_by_hash, self.get_document, insert, "pending")

    def find_by_hash(self, content_hash: str) -> DocumentRow | None:
        return next(iter(self._select_documents("WHERE content_hash = ?", (content_hash,))), None)

    def get_document(self, doc_id: str) -> DocumentRow | None:
        return next(iter(self._select_documents("WHERE id = ?", (doc_id,))), None)

    def list_documents(self, offset: int = 0, limit: int = 100) -> tuple[list[DocumentRow], int]:
        """A page of documents, oldest first, and the total number of documents."""
        with self._db.reading() as connection:
            total = connection.execute("SELECT count(*) FROM documents").fetchone()[0]
            page = self._select_documents("ORDER BY rowid LIMIT ? OFFSET ?", (limit, offset))
        return page, total

    def documents_with_status(self, status: DocumentStatus) -> list[DocumentRow]:
        """Documents with `status`, oldest first."""
        return self._select_documents("WHERE status = ? ORDER BY rowid", (status,))

    def delete_document(self, doc_id: str) -> list[ChunkRow] | None:
        """Delete a document and its chunks; returns the removed chunks, or None if unknown."""
        with self._db.transaction() as connection:
            if self.get_document(doc_id) is None:
                return None
            removed = self._select_chunks("document_id = ? ORDER BY chunk_index", (doc_id,))
            connection.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
            connection.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
        return removed

    def chunks_for(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        """Chunks by id in the order asked; ids that do not exist are skipped."""
        rows = self._select_chunks(
            "id IN (SELECT value FROM json_each(?))", (json.dumps(list(chunk_ids)),)
        )
        return in_requested_order(rows, chunk_ids)

    def chunk_ids(self, document_ids: Sequence[str] | None = None) -> set[int]:
        """Ids of all chunks, or of the chunks of the given documents."""
        with self._db.reading() as connection:
            if document_ids is None:
                rows = connection.execute("SELECT id FROM chunks").fetchall()
            else:
                rows = connection.execute(
                    "SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(document_ids)),),
                ).fetchall()
        return {row[0] for row in rows}

    def set_status(self, doc_id: str, status: DocumentStatus) -> bool:
        """Set a document's status; False if the document does not exist."""
        with self._db.transaction() as connection:
            cursor = connection.execute(
                "UPDATE documents SET status = ? WHERE id = ?", (checked_status(status), doc_id)
            )
        return cursor.rowcount == 1

    def mark_chunk_cached(self, chunk_id: int, kv_key: str | None) -> bool:
        """Record that a chunk's KV was precomputed, stored under ``kv_key`` (None: it could not
        be); False if the chunk does not exist. Its document turns ``cached`` with its last chunk.
        """
        with self._db.transaction() as connection:
            row = connection.execute(
                "UPDATE chunks SET kv_cached = 1, kv_key = ?, kv_present = ?, kv_stale = 0 "
                "WHERE id = ? RETURNING document_id",
                (kv_key, int(kv_key is not None), chunk_id),
            ).fetchone()
            if row is not None:
                kv_presence.refresh_status(connection, [row[0]])
        return row is not None

    def progress(self) -> tuple[dict[str, int], int]:
        """Documents per status, and chunks still waiting for their KV to be precomputed."""
        with self._db.reading() as connection:
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

        Documents still being ingested are left out, so a document turns `cached` only after it
        was `indexed`.
        """
        return self._select_chunks(f"{PENDING} ORDER BY id LIMIT ?", (limit,))

    def claim_pending_chunks(self, limit: int) -> list[ChunkRow]:
        """`pending_chunks`, then stale ones (see `requeue_chunks`): with one server per database
        there is no one to share them with."""
        return self._select_chunks(
            f"{PENDING} OR kv_stale = 1 ORDER BY kv_stale, id LIMIT ?", (limit,)
        )

    def requeue_chunks(self, chunk_ids: Sequence[int]) -> list[int]:
        """Mark chunks stale: their KV is to be precomputed again (their neighbours changed).

        Only chunks whose KV is stored and present are marked, and only once until it is
        precomputed again; they stay cached meanwhile. Returns the ids marked now."""
        with self._db.transaction() as connection:
            rows = connection.execute(
                f"UPDATE chunks SET kv_stale = 1 WHERE {REQUEUEABLE} "
                "AND id IN (SELECT value FROM json_each(?)) RETURNING id",
                (json.dumps(list(chunk_ids)),),
            ).fetchall()
        return sorted(row[0] for row in rows)

    def cancel_requeue(self, chunk_id: int) -> None:
        """A stale chunk could not be precomputed again: it keeps the KV it has."""
        with self._db.transaction() as connection:
            connection.execute("UPDATE chunks SET kv_stale = 0 WHERE id = ?", (chunk_id,))

    def pending_chunks_of(self, document_id: str) -> list[ChunkRow]:
        """The chunks of one document whose KV cache is not stored yet, in chunk order."""
        return self._select_chunks(
            "kv_cached = 0 AND document_id = ? ORDER BY chunk_index", (document_id,)
        )

    def _select_chunks(self, condition: str, parameters: tuple[Any, ...]) -> list[ChunkRow]:
        with self._db.reading() as connection:
            rows = connection.execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE {condition}", parameters
            ).fetchall()
        return [chunk_from_row(row) for row in rows]

    def _select_documents(self, clause: str, parameters: tuple[Any, ...]) -> list[DocumentRow]:
        with self._db.reading() as connection:
            rows = connection.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents {clause}", parameters
            ).fetchall()
        return [document_from_row(row) for row in rows]

    def _insert(
        self, connection: sqlite3.Connection, document: DocumentRow, chunks: list[Chunk]
    ) -> list[int]:
        connection.execute(
            f"INSERT INTO documents ({DOCUMENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            document_values(document),
        )
        return [
            connection.execute(
                "INSERT INTO chunks (document_id, chunk_index, text, token_ids) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                (document.id, index, chunk.text, encode_token_ids(chunk.token_ids)),
            ).fetchone()[0]
            for index, chunk in enumerate(chunks)
        ]
