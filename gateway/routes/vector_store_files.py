"""``/v1/vector_stores/{id}/files`` and ``/file_batches``: attach uploaded files to a store.

Files are indexed when they are uploaded, so an attached file is ``completed`` at once and a
batch is attached whole or not at all: one unknown file id and nothing is attached (404). A
``chunking_strategy`` other than the file's re-chunks it first (`gateway.routes.rechunk`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from openai.types.vector_stores import (
    file_batch_create_params,
    file_create_params,
    file_update_params,
)

from gateway.http.errors import APIError
from gateway.openai.chunking_strategy import strategy_object
from gateway.openai.objects import batch_object, deleted, vector_store_file_object
from gateway.openai.pagination import Page, cursor_error, list_body
from gateway.openai.store_params import attachments_for, unknown_files, vector_store_not_found
from gateway.openai.validation import check_attributes, check_text, parse_params
from gateway.routes.deps import JSONBody, ProjectObjects, RagState
from gateway.routes.rechunk import ChunkingRequest, chunk_files, chunking_asked, requests_for
from gateway.state import AppState, authorized
from retriever import (
    Attachment,
    Chunking,
    PageRequest,
    RagObjects,
    StoreFileRecord,
    UnknownCursor,
    UnknownFiles,
    UnknownVectorStore,
)

router = APIRouter(dependencies=[Depends(authorized)])
FILES = "/v1/vector_stores/{vector_store_id}/files"
BATCHES = "/v1/vector_stores/{vector_store_id}/file_batches"
StatusFilter = Annotated[
    Literal["in_progress", "completed", "failed", "cancelled"] | None, Query(alias="filter")
]


@router.post(FILES)
async def attach_file(
    vector_store_id: str, state: RagState, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    chunking = chunking_asked(state, body, "chunking_strategy")
    params = parse_params(file_create_params.FileCreateParams, body)
    attachments = attachments_for([params["file_id"]], params.get("attributes"), "file_id")
    requests = requests_for([a.file_id for a in attachments], chunking)
    await _chunking(state, objects, vector_store_id, requests, "file_id")
    stores = objects.vector_stores
    attached = await _attaching(stores.attach, vector_store_id, attachments, "file_id")
    return _render(state, attached[0])


@router.get(FILES)
async def list_files(
    vector_store_id: str,
    state: RagState,
    objects: ProjectObjects,
    page: Page,
    status: StatusFilter = None,
) -> dict[str, Any]:
    return await _file_page(state, objects, vector_store_id, page, status, None)


@router.get(FILES + "/{file_id}")
async def retrieve_file(
    vector_store_id: str, file_id: str, state: RagState, objects: ProjectObjects
) -> dict[str, Any]:
    record = await asyncio.to_thread(objects.vector_stores.get_file, vector_store_id, file_id)
    if record is None:
        raise _file_not_found(vector_store_id, file_id)
    return _render(state, record)


@router.post(FILES + "/{file_id}")
async def update_file(
    vector_store_id: str, file_id: str, state: RagState, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise APIError(400, "The request body must be a JSON object.")
    params = parse_params(file_update_params.FileUpdateParams, {**body, "vector_store_id": ""})
    attributes = check_attributes(params["attributes"])
    stores = objects.vector_stores
    record = await asyncio.to_thread(stores.set_attributes, vector_store_id, file_id, attributes)
    if record is None:
        raise _file_not_found(vector_store_id, file_id)
    return _render(state, record)


@router.delete(FILES + "/{file_id}")
async def detach_file(
    vector_store_id: str, file_id: str, state: RagState, objects: ProjectObjects
) -> dict[str, Any]:
    """The file leaves the store; it stays uploaded (delete it through ``/v1/files``)."""
    stores = objects.vector_stores
    if not await asyncio.to_thread(stores.detach, vector_store_id, file_id):
        raise _file_not_found(vector_store_id, file_id)
    return deleted(file_id, "vector_store.file.deleted")


@router.post(BATCHES)
async def create_batch(
    vector_store_id: str, state: RagState, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    chunking = chunking_asked(state, body, "chunking_strategy")
    params = parse_params(file_batch_create_params.FileBatchCreateParams, body)
    if ("file_ids" in params) == ("files" in params):
        raise APIError(400, "Send either 'file_ids' or 'files'.", param="file_ids")
    if "file_ids" in params:
        attachments = attachments_for(list(params["file_ids"]), params.get("attributes"))
        requests = requests_for([a.file_id for a in attachments], chunking)
    else:
        attachments, requests = _per_file(state, body["files"], chunking)
    await _chunking(state, objects, vector_store_id, requests, "file_ids")
    stores = objects.vector_stores
    batch = await _attaching(stores.create_batch, vector_store_id, attachments, "file_ids")
    return batch_object(batch)


@router.get(BATCHES + "/{batch_id}")
async def retrieve_batch(
    vector_store_id: str, batch_id: str, objects: ProjectObjects
) -> dict[str, Any]:
    return batch_object(await _batch(objects, vector_store_id, batch_id))


@router.post(BATCHES + "/{batch_id}/cancel")
async def cancel_batch(
    vector_store_id: str, batch_id: str, objects: ProjectObjects
) -> dict[str, Any]:
    """Files are attached when the batch is created, so there is never anything left to cancel:
    the batch is returned as it is."""
    return batch_object(await _batch(objects, vector_store_id, batch_id))


@router.get(BATCHES + "/{batch_id}/files")
async def list_batch_files(
    vector_store_id: str,
    batch_id: str,
    state: RagState,
    objects: ProjectObjects,
    page: Page,
    status: StatusFilter = None,
) -> dict[str, Any]:
    await _batch(objects, vector_store_id, batch_id)
    return await _file_page(state, objects, vector_store_id, page, status, batch_id)


def _per_file(
    state: AppState, files: list[dict[str, Any]], default: Chunking | None
) -> tuple[list[Attachment], list[ChunkingRequest]]:
    """Attachments of ``files`` and their chunking; the batch's where a file does not say."""
    attachments, requests = [], []
    for index, entry in enumerate(files):
        param = f"files.{index}.chunking_strategy"
        chunking = chunking_asked(state, entry, param) or default
        attributes = check_attributes(entry.get("attributes"), f"files.{index}.attributes")
        attachments.append(Attachment(check_text(entry["file_id"], f"files.{index}"), attributes))
        if chunking is not None:
            requests.append(ChunkingRequest(attachments[-1].file_id, chunking, param))
    return attachments, requests


async def _chunking(
    state: AppState,
    objects: RagObjects,
    vector_store_id: str,
    requests: list[ChunkingRequest],
    param: str,
) -> None:
    """Re-chunk what the attach asks for; nothing changes when the store or a file is unknown."""
    if not requests:
        return
    stores = objects.vector_stores
    if await asyncio.to_thread(stores.get, vector_store_id) is None:
        raise vector_store_not_found(vector_store_id)
    try:
        await chunk_files(state, objects, vector_store_id, requests)
    except UnknownFiles as exc:
        raise unknown_files(exc, param) from exc


async def _attaching(attach: Any, vector_store_id: str, attachments: Any, param: str) -> Any:
    try:
        return await asyncio.to_thread(attach, vector_store_id, attachments)
    except UnknownVectorStore as exc:
        raise vector_store_not_found(vector_store_id) from exc
    except UnknownFiles as exc:
        raise unknown_files(exc, param) from exc


async def _file_page(
    state: AppState,
    objects: RagObjects,
    vector_store_id: str,
    page: PageRequest,
    status: str | None,
    batch_id: str | None,
) -> dict[str, Any]:
    stores = objects.vector_stores
    if await asyncio.to_thread(stores.get, vector_store_id) is None:
        raise vector_store_not_found(vector_store_id)
    try:
        records, has_more = await asyncio.to_thread(
            stores.page_files, vector_store_id, page, status, batch_id
        )
    except UnknownCursor as exc:
        raise cursor_error(exc) from exc
    return list_body(records, has_more, lambda record: _render(state, record))


async def _batch(objects: RagObjects, vector_store_id: str, batch_id: str) -> Any:
    stores = objects.vector_stores
    batch = await asyncio.to_thread(stores.get_batch, vector_store_id, batch_id)
    if batch is None:
        raise APIError(
            404,
            f"No file batch '{batch_id}' in vector store '{vector_store_id}'.",
            param="batch_id",
            code="not_found",
        )
    return batch


def _render(state: AppState, record: StoreFileRecord) -> dict[str, Any]:
    library = state.ready_library()
    chunking = library.chunking_of(record.document_key)
    return vector_store_file_object(record, strategy_object(chunking))


def _file_not_found(vector_store_id: str, file_id: str) -> APIError:
    return APIError(
        404,
        f"No file '{file_id}' in vector store '{vector_store_id}'.",
        param="file_id",
        code="not_found",
    )
