"""``/v1/vector_stores``: create, list, retrieve, modify, delete and search vector stores.

A vector store is a named set of uploaded files; searching it (here or through ``file_search``)
searches the library restricted to the documents of its files.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends
from openai.types import (
    VectorStoreSearchResponse,
    vector_store_create_params,
    vector_store_search_params,
    vector_store_update_params,
)

from gateway.http.errors import APIError
from gateway.openai.filters import parse_filter
from gateway.openai.objects import deleted, dump, vector_store_object
from gateway.openai.pagination import Page, cursor_error, list_body
from gateway.openai.ranking import RankingOptions, ranking_for
from gateway.openai.search import StoreSearch, search_stores
from gateway.openai.store_params import (
    attachments_for,
    expiry_days,
    unknown_files,
    vector_store_not_found,
)
from gateway.openai.validation import check_metadata, check_text, parse_params
from gateway.routes.deps import JSONBody, ProjectObjects, RagState
from gateway.routes.rechunk import chunk_files, chunking_asked, requests_for
from gateway.state import authorized
from retriever import UnknownCursor, UnknownFiles

router = APIRouter(dependencies=[Depends(authorized)])
MAX_SEARCH_RESULTS = 50


@router.post("/v1/vector_stores")
async def create_vector_store(
    state: RagState, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    chunking = chunking_asked(state, body, "chunking_strategy")
    params = parse_params(vector_store_create_params.VectorStoreCreateParams, body)
    file_ids = list(params.get("file_ids") or [])
    try:
        await chunk_files(state, objects, None, requests_for(file_ids, chunking))
        record = await asyncio.to_thread(
            objects.vector_stores.create,
            check_text(params.get("name") or "", "name"),
            check_text(params.get("description") or "", "description") or None,
            check_metadata(params.get("metadata")),
            expiry_days(params.get("expires_after")),
            attachments_for(file_ids, {}),
        )
    except UnknownFiles as exc:
        raise unknown_files(exc, "file_ids") from exc
    return vector_store_object(record)


@router.get("/v1/vector_stores")
async def list_vector_stores(objects: ProjectObjects, page: Page) -> dict[str, Any]:
    try:
        records, has_more = await asyncio.to_thread(objects.vector_stores.page, page)
    except UnknownCursor as exc:
        raise cursor_error(exc) from exc
    return list_body(records, has_more, vector_store_object)


@router.get("/v1/vector_stores/{vector_store_id}")
async def retrieve_vector_store(vector_store_id: str, objects: ProjectObjects) -> dict[str, Any]:
    record = await asyncio.to_thread(objects.vector_stores.get, vector_store_id)
    if record is None:
        raise vector_store_not_found(vector_store_id)
    return vector_store_object(record)


@router.post("/v1/vector_stores/{vector_store_id}")
async def modify_vector_store(
    vector_store_id: str, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    params = parse_params(vector_store_update_params.VectorStoreUpdateParams, body)
    changes: dict[str, Any] = {}
    if params.get("name") is not None:
        changes["name"] = check_text(params["name"], "name")
    if "metadata" in params:
        changes["metadata"] = check_metadata(params["metadata"])
    if "expires_after" in params:
        changes["expires_after_days"] = expiry_days(params["expires_after"])
    stores = objects.vector_stores
    record = await asyncio.to_thread(stores.update, vector_store_id, changes)
    if record is None:
        raise vector_store_not_found(vector_store_id)
    return vector_store_object(record)


@router.delete("/v1/vector_stores/{vector_store_id}")
async def delete_vector_store(vector_store_id: str, objects: ProjectObjects) -> dict[str, Any]:
    """The store goes; its files stay (delete them through ``/v1/files``)."""
    if not await asyncio.to_thread(objects.vector_stores.delete, vector_store_id):
        raise vector_store_not_found(vector_store_id)
    return deleted(vector_store_id, "vector_store.deleted")


@router.post("/v1/vector_stores/{vector_store_id}/search")
async def search_vector_store(
    vector_store_id: str, state: RagState, objects: ProjectObjects, body: JSONBody
) -> dict[str, Any]:
    # ``ranking_options`` is ragblend's to check (below): it takes rankers OpenAI's type lacks.
    openai_body = body
    if isinstance(body, dict):
        openai_body = {key: value for key, value in body.items() if key != "ranking_options"}
    params = parse_params(vector_store_search_params.VectorStoreSearchParams, openai_body)
    query = params["query"]
    queries = [query] if isinstance(query, str) else list(query)
    if not queries or not all(check_text(q, "query").strip() for q in queries):
        raise APIError(400, "'query' must not be empty.", param="query")
    max_results = params.get("max_num_results", 10)
    if not 1 <= max_results <= MAX_SEARCH_RESULTS:
        raise APIError(
            400, f"'max_num_results' must be 1 to {MAX_SEARCH_RESULTS}.", param="max_num_results"
        )
    if params.get("rewrite_query"):
        message = "'rewrite_query' is not supported: ragblend searches the query as sent."
        raise APIError(400, message, param="rewrite_query")
    raw_ranking = body.get("ranking_options")  # with hybrid_search, as file_search takes it
    ranking = (
        None
        if raw_ranking is None
        else parse_params(RankingOptions, raw_ranking, "ranking_options")
    )
    condition = body.get("filters")  # the raw filter: parse_filter checks it to any depth
    search = StoreSearch(
        [vector_store_id],
        queries,
        max_results,
        ranking_for(ranking, state.settings),
        None if condition is None else parse_filter(condition),
        None if ranking is None else ranking.score_threshold,
    )
    library = state.library
    try:
        found = await asyncio.to_thread(search_stores, objects, library, search)
    except APIError as exc:
        if exc.status == 404:
            raise vector_store_not_found(vector_store_id) from exc
        raise
    data = [
        dump(
            VectorStoreSearchResponse(
                file_id=chunk.file.file_id,
                filename=chunk.file.filename,
                score=chunk.hit.score,
                attributes=chunk.file.attributes,
                content=[{"type": "text", "text": chunk.hit.text}],  # type: ignore[list-item]
                ragblend={
                    "document_id": chunk.hit.document_id,
                    "chunk_index": chunk.hit.chunk_index,
                },
            )
        )
        for chunk in found
    ]
    return {
        "object": "vector_store.search_results.page",
        "search_query": queries,
        "data": data,
        "has_more": False,
        "next_page": None,
    }
