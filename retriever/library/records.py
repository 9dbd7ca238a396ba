"""Rows of the document store, how they are encoded in its tables and selected from them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retriever.ingest.chunking import Chunk

if TYPE_CHECKING:
    from retriever.library.kv_presence import Executor

DocumentStatus = Literal["pending", "indexed", "cached", "failed"]
DOCUMENT_STATUSES: tuple[DocumentStatus, ...] = ("pending", "indexed", "cached", "failed")
DOCUMENT_COLUMNS = "id, content_hash, metadata, status, created_at, num_chunks, num_chars, project"
DEFAULT_PROJECT = "default"
"""The project of everything stored before projects, and of every request without API keys."""
PROJECT_CHUNKS = "document_id IN (SELECT id FROM documents WHERE project = ?)"
"""Chunks of one project's documents (one `?`: the project), to list them all: SQLite builds the
set of the project's documents first, which costs as much as the project is large."""
CHUNK_IN_PROJECT = "(SELECT project FROM documents WHERE documents.id = chunks.document_id) = ?"
"""The same, to check chunks found otherwise (by id, by keyword): one lookup per chunk."""
CHUNK_COLUMNS = "id, document_id, chunk_index, text, token_ids, kv_cached, start_char, end_char"
_TOKEN_DTYPE = np.dtype("<i4")


@dataclass(frozen=True)
class DocumentRow:
    """A stored document; `created_at` is Unix time in seconds."""

    id: str
    content_hash: str
    metadata: dict[str, Any]
    status: DocumentStatus
    created_at: float
    num_chunks: int
    num_chars: int
    project: str


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk; `id` is also its vector id in the index. `text` is
    `document_text[start_char:end_char]` of its document's extracted text; both are None for
    chunks stored before spans were kept."""

    id: int
    document_id: str
    chunk_index: int
    text: str
    token_ids: list[int]
    kv_cached: bool
    start_char: int | None
    end_char: int | None


@dataclass(frozen=True)
class DocumentDraft:
    """A document ready to store; `id=None` lets the store pick one."""

    id: str | None
    content_hash: str
    metadata: dict[str, Any]
    num_chars: int
    chunks: list[Chunk]
    project: str


@dataclass(frozen=True)
class Insertion:
    """Outcome of storing one draft: the document (new or the existing duplicate) and, when it was
    created, the ids of its chunks in chunk order."""

    document: DocumentRow
    created: bool
    chunk_ids: list[int] = field(default_factory=list)


def encode_token_ids(token_ids: list[int]) -> bytes:
    """Little-endian int32 bytes; raises OverflowError for ids outside int32."""
    return np.asarray(token_ids, dtype=_TOKEN_DTYPE).tobytes()


def decode_token_ids(blob: bytes) -> list[int]:
    return np.frombuffer(blob, dtype=_TOKEN_DTYPE).tolist()


def metadata_json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True, allow_nan=False)


def document_values(document: DocumentRow) -> tuple[Any, ...]:
    """Values for DOCUMENT_COLUMNS, in order."""
    return (
        document.id,
        document.content_hash,
        metadata_json(document.metadata),
        document.status,
        document.created_at,
        document.num_chunks,
        document.num_chars,
        document.project,
    )


def document_from_row(row: tuple[Any, ...]) -> DocumentRow:
    """A document from a row selected as DOCUMENT_COLUMNS."""
    doc_id, content_hash, metadata, status, created_at, num_chunks, num_chars, project = row
    return DocumentRow(
        doc_id,
        content_hash,
        json.loads(metadata),
        status,
        created_at,
        num_chunks,
        num_chars,
        project,
    )


def chunk_from_row(row: tuple[Any, ...]) -> ChunkRow:
    """A chunk from a row selected as CHUNK_COLUMNS."""
    chunk_id, document_id, chunk_index, text, token_ids, kv_cached, start, end = row
    ids = decode_token_ids(token_ids)
    return ChunkRow(chunk_id, document_id, chunk_index, text, ids, bool(kv_cached), start, end)


def select_document(connection: Executor, condition: str, value: Any) -> DocumentRow | None:
    """The one document matching `condition` (one `?`, bound to `value`), or None."""
    return next(iter(select_documents(connection, f"WHERE {condition}", value)), None)


def select_documents(connection: Executor, clause: str, *parameters: Any) -> list[DocumentRow]:
    rows = connection.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM documents {clause}", parameters
    ).fetchall()
    return [document_from_row(row) for row in rows]


def select_chunks(connection: Executor, condition: str, *parameters: Any) -> list[ChunkRow]:
    rows = connection.execute(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE {condition}", parameters
    ).fetchall()
    return [chunk_from_row(row) for row in rows]
