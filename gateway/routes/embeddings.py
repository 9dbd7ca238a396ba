"""``POST /v1/embeddings``: the library's embedding model, in OpenAI's shape."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from fastapi import APIRouter, Depends, Request

from gateway.openai.embeddings import (
    CountingEmbedder,
    check_fit,
    check_model,
    embedding_response,
    parse_query,
)
from gateway.routes.deps import JSONBody
from gateway.state import authorized, library_state

router = APIRouter(dependencies=[Depends(authorized)])


@router.post("/v1/embeddings")
async def create_embeddings(request: Request, body: JSONBody) -> dict[str, Any]:
    """The request's own checks come first: a bad request is a 400 even while the model loads."""
    query = parse_query(body)
    state = library_state(request)  # 503 until the engine and the library have loaded
    library = state.ready_library()
    embedder = cast(CountingEmbedder, library.embedder)
    check_model(query, embedder, state.model_names())
    state.gate.enter()  # the embedder serves ingest and retrieval too: admitted like generations
    try:
        counts = await asyncio.to_thread(embedder.token_counts, query.texts)
        check_fit(query, embedder, counts)
        vectors = await asyncio.to_thread(embedder.embed, query.texts)
    finally:
        state.gate.leave()
    return embedding_response(query, embedder.name, vectors, counts)
