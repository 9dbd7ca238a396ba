"""The parts of the document store (`retriever.library.document_store`) that hold no connection:
de-duplication and id conflicts when storing a batch, new document rows and how they are inserted,
chunk order and status checks.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from retriever.library.changelog import encode_vector
from retriever.library.document_ids import stored_id
from retriever.library.records import (
    DOCUMENT_COLUMNS,
    DOCUMENT_STATUSES,
    ChunkRow,
    DocumentDraft,
    DocumentRow,
    DocumentStatus,
    Insertion,
    document_values,
    encode_token_ids,
    metadata_json,
)

if TYPE_CHECKING:
    from retriever.library.kv_presence import Executor


_CHUNK_INSERT = "document_id, chunk_index, text, token_ids, start_char, end_char"
"""The columns a new chunk row is given (and its embedding where the store keeps them)."""


class DocumentConflict(Exception):
    """A document id is already taken by a document with different content."""


class DuplicateVanished(Exception):
    """A draft prepared without chunks, as a copy of stored content, whose content was deleted
    before the batch was stored: the batch must be prepared again (with chunks)."""


def store_drafts(
    drafts: Sequence[DocumentDraft],
    find_by_hash: Callable[[str], DocumentRow | None],
    get_document: Callable[[str], DocumentRow | None],
    insert: Callable[[DocumentRow, int], list[int]],
    status: DocumentStatus,
) -> list[Insertion]:
    """Store each new draft through `insert(document, position of its draft)`, which returns its
    chunk ids; all inside the caller's transaction, whose reads `find_by_hash` and
    `get_document` must see the rows inserted so far.

    Content already stored (or earlier in `drafts`) yields the existing document with
    `created=False`; an explicit id the draft's project already gave other content raises
    `DocumentConflict`.
    """
    insertions: list[Insertion] = []
    for position, draft in enumerate(drafts):
        existing = find_by_hash(draft.content_hash)
        if existing is not None:
            insertions.append(Insertion(existing, created=False))
            continue
        if not draft.chunks:
            raise DuplicateVanished(f"content {draft.content_hash} is no longer stored")
        if draft.id is not None and get_document(stored_id(draft.id, draft.project)) is not None:
            raise DocumentConflict(f"document {draft.id!r} already exists with different content")
        document = new_document(draft, status)
        insertions.append(Insertion(document, True, insert(document, position)))
    return insertions


def new_document(draft: DocumentDraft, status: DocumentStatus) -> DocumentRow:
    """The row of a draft about to be stored, under the id its project gave it (a fresh one
    when it gave none) as the store keeps it (`stored_id`)."""
    return DocumentRow(
        id=stored_id(draft.id or f"doc-{uuid.uuid4().hex}", draft.project),
        content_hash=draft.content_hash,
        metadata=json.loads(metadata_json(draft.metadata)),
        status=status,
        created_at=time.time(),
        num_chunks=len(draft.chunks),
        num_chars=draft.num_chars,
        project=draft.project,
    )


def insert_draft(
    connection: Executor,
    document: DocumentRow,
    draft: DocumentDraft,
    vectors: np.ndarray | None,
) -> list[int]:
    """Insert a document and its draft's chunks, with their `vectors` (one per chunk) where the
    store keeps embeddings (None where it does not); returns the new chunk ids in order."""
    connection.execute(
        f"INSERT INTO documents ({DOCUMENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        document_values(document),
    )
    embedding = "" if vectors is None else ", embedding"
    rows = [None] * len(draft.chunks) if vectors is None else list(vectors)
    chunk_ids: list[int] = []
    for index, (chunk, vector) in enumerate(zip(draft.chunks, rows, strict=True)):
        token_ids = encode_token_ids(chunk.token_ids)
        values: tuple[object, ...] = (document.id, index, chunk.text, token_ids)
        values += (chunk.start_char, chunk.end_char)
        if vector is not None:
            values += (encode_vector(vector),)
        row = connection.execute(
            f"INSERT INTO chunks ({_CHUNK_INSERT}{embedding}) "
            f"VALUES ({', '.join('?' * len(values))}) RETURNING id",
            values,
        ).fetchone()
        chunk_ids.append(int(row[0]))
    return chunk_ids


def vectors_by_draft(
    drafts: Sequence[DocumentDraft], vectors: np.ndarray | None
) -> list[np.ndarray | None]:
    """Each draft's rows of `vectors` (one row per chunk of `drafts`, in order); None each
    without vectors."""
    if vectors is None:
        return [None] * len(drafts)
    starts = np.cumsum([0] + [len(draft.chunks) for draft in drafts])
    return [vectors[start:end] for start, end in itertools.pairwise(starts)]


def in_requested_order(rows: Sequence[ChunkRow], chunk_ids: Sequence[int]) -> list[ChunkRow]:
    """`rows` in the order of `chunk_ids`; ids without a row are skipped."""
    by_id = {row.id: row for row in rows}
    return [by_id[chunk_id] for chunk_id in chunk_ids if chunk_id in by_id]


def checked_status(status: DocumentStatus) -> DocumentStatus:
    if status not in DOCUMENT_STATUSES:
        raise ValueError(f"status must be one of {DOCUMENT_STATUSES}, got {status!r}")
    return status
