"""``/v1/documents``: ingest (JSON or file upload), list, inspect and delete documents.

An ingest may say how to chunk its documents with OpenAI's ``chunking_strategy``
(`gateway.openai.chunking_strategy`): a JSON field, or a form field holding that JSON. The same
text chunked two ways is two documents; each document reports its chunking.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.http.errors import APIError
from gateway.http.upload_text import upload_form, upload_text
from gateway.openai.chunking_strategy import requested_chunking, strategy_object
from gateway.settings import Settings
from gateway.state import LibraryState, RequestTenant, authorized

router = APIRouter(dependencies=[Depends(authorized)])


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, min_length=1, max_length=200)
    text: str
    metadata: dict[str, Any] | None = None


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentIn] = Field(min_length=1)
    chunking_strategy: Any = None


@router.post("/v1/documents")
async def ingest_documents(
    request: Request, state: LibraryState, tenant: RequestTenant
) -> dict[str, Any]:
    from retriever import DocumentConflict, InvalidIngest

    library = state.ready_library()
    with state.ingests.admitted():
        documents = await _read_documents(request, state.settings, library.default_chunking)
        try:
            results = await asyncio.to_thread(library.ingest, documents, tenant=tenant)
        except DocumentConflict as exc:
            raise APIError(409, str(exc), param="documents") from exc
        except InvalidIngest as exc:
            raise APIError(400, str(exc), param="documents") from exc
    if state.precomputer is not None:
        state.precomputer.notify()
    return {"object": "list", "data": [_result(result) for result in results]}


async def _read_documents(request: Request, settings: Settings, default: Any) -> list[Any]:
    """The request's documents; every limit is checked while the body is read, not after."""
    limit = settings.max_ingest_request_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"The request body has {declared} bytes; the limit is {limit}.")
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return await _read_uploads(request, content_type, settings, default)
    return await _read_json(request, settings, default)


async def _read_uploads(
    request: Request, content_type: str, settings: Settings, default: Any
) -> list[Any]:
    from retriever import NewDocument

    form = await upload_form(request, content_type, settings, settings.max_documents_per_request)
    if not form.files:
        raise APIError(400, "Upload at least one file in a 'file' field.", param="file")
    chunking = requested_chunking(_form_strategy(form.fields), default)
    documents = []
    for upload in form.files:
        text = await upload_text(upload, settings)
        documents.append(NewDocument(None, text, {"filename": upload.filename}, chunking))
    return documents


def _form_strategy(fields: dict[str, str]) -> Any:
    if "chunking_strategy" not in fields:
        return None
    try:
        return json.loads(fields["chunking_strategy"])
    except ValueError as exc:
        raise APIError(
            400, "The 'chunking_strategy' field must hold JSON.", param="chunking_strategy"
        ) from exc


async def _read_json(request: Request, settings: Settings, default: Any) -> list[Any]:
    from retriever import NewDocument

    raw = bytearray()
    async for piece in request.stream():
        raw += piece
        if len(raw) > settings.max_ingest_request_bytes:
            raise APIError(
                413,
                f"The request body is larger than the limit of "
                f"{settings.max_ingest_request_bytes} bytes.",
            )
    try:
        body = await asyncio.to_thread(IngestBody.model_validate_json, bytes(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or None
        raise APIError(400, f"Invalid document batch: {first.get('msg')}", param=where) from exc
    if len(body.documents) > settings.max_documents_per_request:
        raise APIError(
            413,
            f"The batch has {len(body.documents)} documents; the limit is "
            f"{settings.max_documents_per_request} per request.",
            param="documents",
        )
    for document in body.documents:
        size = len(document.text.encode("utf-8", "surrogatepass"))
        _check_size(size, settings.max_document_bytes, document.id)
    chunking = requested_chunking(body.chunking_strategy, default)
    return [NewDocument(d.id, d.text, d.metadata, chunking) for d in body.documents]


def _check_size(size: int, limit: int, name: str | None) -> None:
    if size > limit:
        label = f"'{name}'" if name else "of the request"
        raise APIError(413, f"Document {label} has {size} bytes; the limit is {limit}.")


def _result(result: Any) -> dict[str, Any]:
    return {
        "id": result.id,
        "object": "document",
        "created": result.created,
        "num_chunks": result.num_chunks,
        "status": result.status,
    }


def _document(row: Any, library: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "object": "document",
        "status": row.status,
        "num_chunks": row.num_chunks,
        "num_chars": row.num_chars,
        "metadata": row.metadata,
        "created_at": int(row.created_at),
        "chunking_strategy": strategy_object(library.chunking_of(row.content_hash)),
    }


@router.get("/v1/documents")
async def list_documents(
    state: LibraryState,
    tenant: RequestTenant,
    offset: int = Query(0, ge=0),
    limit: int = Query(20, ge=1, le=200),
) -> dict[str, Any]:
    library = state.ready_library()
    rows, total = await asyncio.to_thread(library.list, offset, limit, tenant=tenant)
    data = [_document(row, library) for row in rows]
    return {"object": "list", "data": data, "total": total, "offset": offset, "limit": limit}


@router.get("/v1/documents/{document_id}")
async def get_document(
    document_id: str, state: LibraryState, tenant: RequestTenant
) -> dict[str, Any]:
    library = state.ready_library()
    row = await asyncio.to_thread(library.get, document_id, tenant=tenant)
    if row is None:
        raise APIError(404, f"No document '{document_id}'.", param="id", code="document_not_found")
    return _document(row, library)


@router.delete("/v1/documents/{document_id}")
async def delete_document(
    document_id: str, state: LibraryState, tenant: RequestTenant
) -> dict[str, Any]:
    library = state.ready_library()
    chunks = await asyncio.to_thread(library.delete, document_id, tenant=tenant)
    if chunks is None:
        raise APIError(404, f"No document '{document_id}'.", param="id", code="document_not_found")
    if state.chunk_cache is not None:
        evicted = [chunk.token_ids for chunk in chunks]
        await state.chunk_cache.evict(evicted, tenant.kv_salt)
    if state.precomputer is not None:
        state.precomputer.notify()  # chunks computed behind the deleted ones
    return {"id": document_id, "object": "document", "deleted": True}
