"""Rows of vector stores, their files and file batches, as the SQL below selects them.

A file's state is read from its document rather than stored twice: ``in_progress`` while the
document is being ingested, ``completed`` once its chunks are indexed (searchable). Whether its
chunk KV is stored yet is the document's status (``indexed`` or ``cached``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retriever.library.document_ids import client_id
from retriever.library.records import DocumentStatus

DAY_SECONDS = 86_400
STORE_FILES = (
    "vector_store_files v JOIN files f ON f.id = v.file_id JOIN documents d ON d.id = f.document_id"
)
STORE_FILE_STATUS = "(CASE WHEN d.status = 'pending' THEN 'in_progress' ELSE 'completed' END)"
STORE_FILE_COLUMNS = (
    "v.file_id, v.vector_store_id, f.filename, v.attributes, v.created_at, f.bytes, "
    "f.document_id, d.status, d.num_chunks, d.content_hash, d.project"
)


def in_marks(values: Sequence[str]) -> str:
    """Placeholders of an IN list that SQLite and PostgreSQL both take; `NULL` for no values,
    which matches nothing."""
    return ", ".join("?" * len(values)) or "NULL"


def counts_columns(link: str) -> str:
    """Total, in-progress and bytes of the files whose ``link`` (e.g. ``v.vector_store_id = s.id``)
    holds, as three columns of an enclosing SELECT."""
    return (
        f"(SELECT COUNT(*) FROM vector_store_files v WHERE {link}), "
        f"(SELECT COUNT(*) FROM {STORE_FILES} WHERE {link} AND d.status = 'pending'), "
        f"(SELECT COALESCE(SUM(f.bytes), 0) FROM {STORE_FILES} WHERE {link})"
    )


STORE_COLUMNS = (
    "s.id, s.name, s.description, s.metadata, s.expires_after_days, s.created_at, "
    f"s.last_active_at, {counts_columns('v.vector_store_id = s.id')}"
)
BATCH_COLUMNS = f"b.id, b.vector_store_id, b.created_at, {counts_columns('v.batch_id = b.id')}"


@dataclass(frozen=True)
class FileCounts:
    total: int
    in_progress: int

    @property
    def completed(self) -> int:
        return self.total - self.in_progress


@dataclass(frozen=True)
class VectorStoreRecord:
    id: str
    name: str
    description: str | None
    metadata: dict[str, str]
    expires_after_days: int | None
    created_at: int
    last_active_at: int
    file_counts: FileCounts
    usage_bytes: int

    @property
    def expires_at(self) -> int | None:
        if self.expires_after_days is None:
            return None
        return self.last_active_at + self.expires_after_days * DAY_SECONDS

    @property
    def status(self) -> str:
        if self.expires_at is not None and self.expires_at <= time.time():
            return "expired"
        return "in_progress" if self.file_counts.in_progress else "completed"


@dataclass(frozen=True)
class StoreFileRecord:
    file_id: str
    vector_store_id: str
    filename: str
    attributes: dict[str, Any]
    created_at: int
    usage_bytes: int
    document_id: str
    document_status: DocumentStatus
    num_chunks: int
    document_key: str
    """What tells the document apart, its chunking included (`retriever.library.documents`)."""

    @property
    def status(self) -> str:
        return "in_progress" if self.document_status == "pending" else "completed"


@dataclass(frozen=True)
class BatchRecord:
    id: str
    vector_store_id: str
    created_at: int
    file_counts: FileCounts

    @property
    def status(self) -> str:
        return "in_progress" if self.file_counts.in_progress else "completed"


def store_from_row(row: tuple[Any, ...]) -> VectorStoreRecord:
    store_id, name, description, metadata, days, created, active, total, busy, used = row
    counts = FileCounts(total, busy)
    return VectorStoreRecord(
        store_id, name, description, json.loads(metadata), days, created, active, counts, used
    )


def store_file_from_row(row: tuple[Any, ...]) -> StoreFileRecord:
    """A store's file from a row selected as STORE_FILE_COLUMNS, its document named as its project
    does (`retriever.library.document_ids`)."""
    file_id, store_id, filename, attributes, created, used, document_id, *document = row
    status, chunks, key, project = document
    return StoreFileRecord(
        file_id,
        store_id,
        filename,
        json.loads(attributes),
        created,
        used,
        client_id(document_id, project),
        status,
        chunks,
        key,
    )


def batch_from_row(row: tuple[Any, ...]) -> BatchRecord:
    batch_id, store_id, created, total, busy, _ = row
    return BatchRecord(batch_id, store_id, created, FileCounts(total, busy))
