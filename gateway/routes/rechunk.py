"""Files chunked the way their attach to a vector store asks (``chunking_strategy``).

A file's text is one library document, chunked the default way when it is uploaded. An attach
whose chunking differs re-chunks the file before it is attached: the text is extracted again from
the stored bytes and ingested chunked that way (or found, when a document of that text and
chunking is already stored), the file moves to that document, and the document it leaves is
deleted when nothing else uses it. A file has one chunking at a time, so a file attached to
another vector store is not re-chunked (400). Everything is checked before anything is re-chunked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.http.errors import APIError
from gateway.http.multipart import UploadedFile
from gateway.http.upload_text import upload_text
from gateway.openai.chunking_strategy import requested_chunking, strategy_object
from gateway.state import AppState
from retriever import Chunking, FileRecord, NewDocument, RagObjects, Tenant, UnknownFiles


@dataclass(frozen=True)
class ChunkingRequest:
    """A file an attach names, the chunking it asks for and the field that asked."""

    file_id: str
    chunking: Chunking
    param: str


def chunking_asked(state: AppState, fields: Any, param: str) -> Chunking | None:
    """The chunking ``fields["chunking_strategy"]`` asks for (None: it does not say); a 400
    naming ``param`` when it is not valid."""
    library = state.ready_library()
    strategy = fields.get("chunking_strategy") if isinstance(fields, dict) else None
    return requested_chunking(strategy, library.default_chunking, param)


def requests_for(file_ids: Sequence[str], chunking: Chunking | None) -> list[ChunkingRequest]:
    """The files of a request with one ``chunking_strategy`` for all of them."""
    if chunking is None:
        return []
    return [ChunkingRequest(file_id, chunking, "chunking_strategy") for file_id in file_ids]


async def chunk_files(
    state: AppState,
    objects: RagObjects,
    vector_store_id: str | None,
    requests: Sequence[ChunkingRequest],
) -> None:
    """Re-chunk the files whose chunking differs from the one asked for; ``vector_store_id`` is
    the store they are being attached to (None: one being created). An unknown file raises
    `UnknownFiles`, a file of another store that would change a 400, before any work."""
    moves = await asyncio.to_thread(_planned_moves, state, objects, vector_store_id, requests)
    for record, chunking in moves:
        await _move(state, objects, record, chunking)
    if moves and state.precomputer is not None:
        state.precomputer.notify()


def _planned_moves(
    state: AppState,
    objects: RagObjects,
    vector_store_id: str | None,
    requests: Sequence[ChunkingRequest],
) -> list[tuple[FileRecord, Chunking]]:
    library, files = state.ready_library(), objects.files
    records = {request.file_id: files.get(request.file_id) for request in requests}
    unknown = [file_id for file_id, record in records.items() if record is None]
    if unknown:
        raise UnknownFiles(unknown)
    planned: dict[str, Chunking] = {}
    moves: list[tuple[FileRecord, Chunking]] = []
    for request in requests:
        record = records[request.file_id]
        assert record is not None
        if planned.setdefault(request.file_id, request.chunking) != request.chunking:
            raise APIError(
                400,
                f"File '{request.file_id}' is asked for twice, chunked two ways.",
                param=request.param,
            )
        document = library.get(record.document_id, tenant=objects.tenant)
        if document is None or library.chunking_of(document.content_hash) == request.chunking:
            continue
        others = [s for s in files.vector_stores_of(record.id) if s != vector_store_id]
        if others:
            current = strategy_object(library.chunking_of(document.content_hash))
            raise APIError(
                400,
                f"File '{record.id}' is in vector store '{others[0]}' chunked as {current}; a "
                "file has one chunking at a time: upload it again to chunk it another way.",
                param=request.param,
            )
        if all(moved.id != record.id for moved, _ in moves):
            moves.append((record, request.chunking))
    return moves


async def _move(
    state: AppState, objects: RagObjects, record: FileRecord, chunking: Chunking
) -> None:
    library, files = state.ready_library(), objects.files
    content = await asyncio.to_thread(files.content, record.id)
    if content is None:
        raise UnknownFiles([record.id])  # deleted meanwhile
    text = await upload_text(UploadedFile(record.filename, None, content), state.settings)
    metadata = {"filename": record.filename, "file_id": record.id}
    document = NewDocument(None, text, metadata, chunking)
    ingested = (await asyncio.to_thread(library.ingest, [document], tenant=objects.tenant))[0]
    left = await asyncio.to_thread(files.move_to_document, record.id, ingested.id, ingested.created)
    if left is not None:
        await drop_document(state, objects.tenant, left)


async def drop_document(state: AppState, tenant: Tenant, document_id: str) -> None:
    """Delete a document of `tenant` no file uses any more, its chunk KV, and requeue the
    chunks computed behind its chunks."""
    library = state.ready_library()
    chunks = await asyncio.to_thread(library.delete, document_id, tenant=tenant)
    if chunks and state.chunk_cache is not None:
        evicted = [chunk.token_ids for chunk in chunks]
        await state.chunk_cache.evict(evicted, tenant.kv_salt)
    if chunks and state.precomputer is not None:
        state.precomputer.notify()  # chunks computed behind the deleted ones
