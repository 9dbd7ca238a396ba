"""What every document-store backend (SQLite, PostgreSQL) does the same way, apart from its SQL:
de-duplication and id conflicts when storing a batch, new document rows, chunk order, status checks,
and which chunks await precompute.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence

from retriever.records import (
    DOCUMENT_STATUSES,
    ChunkRow,
    DocumentDraft,
    DocumentRow,
    DocumentStatus,
    Insertion,
    metadata_json,
)

PENDING = "(kv_cached = 0 AND document_id IN (SELECT id FROM documents WHERE status = 'indexed'))"
"""Chunks of indexed documents whose KV was never precomputed."""
REQUEUEABLE = "kv_cached = 1 AND kv_key IS NOT NULL AND kv_present = 1 AND kv_stale = 0"
"""Chunks that may be marked stale: their KV is stored and present, and not already stale."""


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
    `created=False`; an explicit id taken by other content raises `DocumentConflict`.
    """
    insertions: list[Insertion] = []
    for position, draft in enumerate(drafts):
        existing = find_by_hash(draft.content_hash)
        if existing is not None:
            insertions.append(Insertion(existing, created=False))
            continue
        if not draft.chunks:
            raise DuplicateVanished(f"content {draft.content_hash} is no longer stored")
        if draft.id is not None and get_document(draft.id) is not None:
            raise DocumentConflict(f"document {draft.id!r} already exists with different content")
        document = new_document(draft, status)
        insertions.append(Insertion(document, True, insert(document, position)))
    return insertions


def new_document(draft: DocumentDraft, status: DocumentStatus) -> DocumentRow:
    """The row of a draft about to be stored; a draft without an id gets a fresh one."""
    return DocumentRow(
        id=draft.id or f"doc-{uuid.uuid4().hex}",
        content_hash=draft.content_hash,
        metadata=json.loads(metadata_json(draft.metadata)),
        status=status,
        created_at=time.time(),
        num_chunks=len(draft.chunks),
        num_chars=draft.num_chars,
    )


def in_requested_order(rows: Sequence[ChunkRow], chunk_ids: Sequence[int]) -> list[ChunkRow]:
    """`rows` in the order of `chunk_ids`; ids without a row are skipped."""
    by_id = {row.id: row for row in rows}
    return [by_id[chunk_id] for chunk_id in chunk_ids if chunk_id in by_id]


def checked_status(status: DocumentStatus) -> DocumentStatus:
    if status not in DOCUMENT_STATUSES:
        raise ValueError(f"status must be one of {DOCUMENT_STATUSES}, got {status!r}")
    return status
