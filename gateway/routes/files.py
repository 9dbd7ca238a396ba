"""``/v1/files``: upload, list, retrieve, read and delete files, as OpenAI's Files API.

An uploaded file becomes a library document at once: its text is extracted, chunked, embedded
and indexed (the chunk KV is precomputed in the background), so attaching it to a vector store is
immediate. Files with the same text (and chunking, `gateway.routes.rechunk`) share one document,
deleted with the last of them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from openai.types import FilePurpose

from gateway.http.errors import APIError
from gateway.http.multipart import UploadedFile
from gateway.http.upload_text import upload_form, upload_text
from gateway.openai.objects import deleted, file_object
from gateway.openai.pagination import FilePage, cursor_error, list_body
from gateway.openai.validation import parse_params
from gateway.routes.deps import ProjectObjects, RagState
from gateway.routes.rechunk import drop_document
from gateway.state import AppState, authorized
from retriever import FileRecord, RagObjects, UnknownCursor, new_file_id

router = APIRouter(dependencies=[Depends(authorized)])
RETRIEVAL_PURPOSES = ("assistants", "user_data")


@router.post("/v1/files")
async def create_file(request: Request, state: RagState, objects: ProjectObjects) -> dict[str, Any]:
    with state.ingests.admitted():
        upload, purpose = await _read_upload(request, state)
        text = await upload_text(upload, state.settings)
        record = await _store(state, objects, upload, purpose, text)
    if state.precomputer is not None:
        state.precomputer.notify()
    return file_object(record)


async def _read_upload(request: Request, state: AppState) -> tuple[UploadedFile, str]:
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        raise APIError(400, "Upload as multipart/form-data with 'file' and 'purpose' fields.")
    form = await upload_form(request, content_type, state.settings, max_files=1)
    if "purpose" not in form.fields:
        raise APIError(400, "Missing required parameter: 'purpose'.", param="purpose")
    purpose = parse_params(FilePurpose, form.fields["purpose"], "purpose")
    if purpose not in RETRIEVAL_PURPOSES:
        raise APIError(
            400,
            f"ragblend keeps files for retrieval only: 'purpose' must be one of "
            f"{', '.join(RETRIEVAL_PURPOSES)}, not '{purpose}'.",
            param="purpose",
        )
    if not form.files:
        raise APIError(400, "Missing required parameter: 'file'.", param="file")
    return form.files[0], purpose


async def _store(
    state: AppState, objects: RagObjects, upload: UploadedFile, purpose: str, text: str
) -> FileRecord:
    """The file and its document (both the project's); a document this upload created goes if
    the file is not kept."""
    from retriever import InvalidIngest, NewDocument

    library = state.ready_library()
    file_id = new_file_id()
    document = NewDocument(file_id, text, {"filename": upload.filename, "file_id": file_id})
    try:
        ingested = (await asyncio.to_thread(library.ingest, [document], tenant=objects.tenant))[0]
    except InvalidIngest as exc:
        raise APIError(400, f"{upload.filename}: {exc}", param="file") from exc
    try:
        return await asyncio.to_thread(
            objects.files.add,
            file_id,
            ingested.id,
            ingested.created,
            upload.filename,
            purpose,
            upload.data,
        )
    except BaseException:
        if ingested.created:
            await asyncio.to_thread(library.delete, ingested.id, tenant=objects.tenant)
        raise


@router.get("/v1/files")
async def list_files(
    objects: ProjectObjects, page: FilePage, purpose: str | None = Query(None)
) -> dict[str, Any]:
    try:
        records, has_more = await asyncio.to_thread(objects.files.page, page, purpose)
    except UnknownCursor as exc:
        raise cursor_error(exc) from exc
    return list_body(records, has_more, file_object)


@router.get("/v1/files/{file_id}")
async def retrieve_file(file_id: str, objects: ProjectObjects) -> dict[str, Any]:
    record = await asyncio.to_thread(objects.files.get, file_id)
    if record is None:
        raise file_not_found(file_id)
    return file_object(record)


@router.get("/v1/files/{file_id}/content")
async def file_content(file_id: str, objects: ProjectObjects) -> Response:
    content = await asyncio.to_thread(objects.files.content, file_id)
    if content is None:
        raise file_not_found(file_id)
    return Response(content, media_type="application/octet-stream")


@router.delete("/v1/files/{file_id}")
async def delete_file(file_id: str, state: RagState, objects: ProjectObjects) -> dict[str, Any]:
    """Detaches the file from every vector store; its document goes with the last file using it."""
    existed, document_id = await asyncio.to_thread(objects.files.delete, file_id)
    if not existed:
        raise file_not_found(file_id)
    if document_id is not None and state.library is not None:
        await drop_document(state, objects.tenant, document_id)
    return deleted(file_id, "file")


def file_not_found(file_id: str) -> APIError:
    return APIError(404, f"No such File object: '{file_id}'.", param="file_id", code="not_found")
