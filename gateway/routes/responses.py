"""``/v1/responses``: OpenAI's Responses API for text, with the ``file_search`` tool and
``function`` tools (the model's calls come back as ``function_call`` items; a later request
sends ``function_call_output`` items, with or without ``previous_response_id``).

``file_search`` searches the named vector stores for the last user message and places the chunks
found as blended documents (their cached KV reused at any position, as chat's ``retrieval``
does); the answer cites their files. ``store`` (default true) keeps the response for
``GET /v1/responses/{id}`` and for a later turn's ``previous_response_id``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage, SamplingFields
from gateway.openai.ranking import ranking_for
from gateway.openai.response_build import ResponseBuilder
from gateway.openai.response_request import ResponsesTurn, parse_turn
from gateway.openai.response_tools import assistant_turn, function_choice
from gateway.openai.search import FoundChunk, StoreSearch, search_stores
from gateway.openai.tools import ToolCalling, parser_name, tool_calling
from gateway.openai.validation import invalid
from gateway.rag.chunked_prompt import Chunks, stored_chunks
from gateway.routes.deps import JSONBody, ProjectObjects, objects_of
from gateway.serve.plan import TurnAsk, plan_turn
from gateway.serve.respond import PreparedRequest, json_response, start_generation
from gateway.serve.response_events import response_events
from gateway.serve.shapes import ChatShape
from gateway.state import (
    AppState,
    CurrentState,
    RequestTenant,
    authorized,
    check_model,
    ready_state,
)
from retriever import StoredResponse, Tenant

router = APIRouter(dependencies=[Depends(authorized)])


@router.post("/v1/responses", response_model=None)
async def create_response(
    request: Request, state: CurrentState, tenant: RequestTenant, body: JSONBody
) -> Response:
    """The request's own checks come first: a bad request is a 400 even while the model loads."""
    arrived = time.perf_counter()
    turn = parse_turn(body, state.settings.retrieval_top_k)
    check_model(turn.model, state)
    fields = _sampling(turn)
    calling = _calling(turn, state)
    ready_state(request)
    history = await _history(state, tenant, turn)
    found = None if turn.file_search is None else await _search(state, tenant, turn)
    tools = None if calling is None else calling.template_tools()
    shape = ChatShape(_conversation(turn, history), tools, state.tokenizer)
    room = turn.max_output_tokens or state.settings.max_tokens_default
    ask = TurnAsk(found=_chunks(found, state), room=room, default_retrieval=False)
    planned = await plan_turn(shape, ask, state, tenant)
    placed = found if planned.placed is None else found[: planned.placed]
    builder = ResponseBuilder(turn, placed, calling, state.tokenizer)
    guided = None if calling is None else calling.structured_outputs()
    prepared = PreparedRequest(fields, planned, None, arrived, guided)
    started = start_generation(request, state, prepared)
    keep = partial(_keep, state, tenant, turn, history)
    if turn.stream:
        events = response_events(builder, started, state.shutdown.deadline, keep)
        return StreamingResponse(
            events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
    response = await json_response(request, state, started, prepared, builder)
    if builder.final is not None:
        await keep(builder.final)
    return response


def _conversation(turn: ResponsesTurn, history: list[dict[str, Any]]) -> list[ChatMessage]:
    """The instructions (this turn's only), the earlier turns, then this turn's input."""
    system = [] if turn.instructions is None else [{"role": "system", "content": turn.instructions}]
    return [ChatMessage.model_validate(message) for message in system + history + turn.messages]


def _chunks(found: list[FoundChunk] | None, state: AppState) -> Chunks | None:
    """What ``file_search`` found as chunks, best first (their stored token ids); None when it
    found nothing."""
    if not found:
        return None
    chunks = stored_chunks([chunk.hit.token_ids for chunk in found], state.tokenizer)
    return replace(chunks, context="library" if state.neighbour_contexts else "cold")


def _sampling(turn: ResponsesTurn) -> SamplingFields:
    given = {
        "temperature": turn.temperature,
        "top_p": turn.top_p,
        "max_tokens": turn.max_output_tokens,
    }
    try:
        return SamplingFields.model_validate(
            {
                "model": turn.model,
                "stream": turn.stream,
                "response_format": turn.response_format,
                **{key: value for key, value in given.items() if value is not None},
            }
        )
    except ValidationError as exc:
        raise invalid(exc) from None


def _calling(turn: ResponsesTurn, state: AppState) -> ToolCalling | None:
    """The function tools as chat serves them; None without any (or with ``tool_choice``
    ``none``)."""
    if not turn.functions:
        return None
    parser = parser_name(state.settings.tool_parser, state.settings.model)
    choice = function_choice(turn.tool_choice)
    return tool_calling(
        turn.functions,
        choice,
        turn.parallel_tool_calls,
        parser,
        turn.function_params,
        from_text=state.settings.tool_calls_from_text,
    )


async def _history(state: AppState, tenant: Tenant, turn: ResponsesTurn) -> list[dict[str, Any]]:
    """The conversation up to ``previous_response_id`` (one of the project's); empty without
    one."""
    if turn.previous_response_id is None:
        return []
    responses = objects_of(state, tenant).responses
    stored = await asyncio.to_thread(responses.get, turn.previous_response_id)
    if stored is None:
        raise APIError(
            404,
            f"No stored response '{turn.previous_response_id}'.",
            param="previous_response_id",
            code="not_found",
        )
    return stored.conversation


async def _search(state: AppState, tenant: Tenant, turn: ResponsesTurn) -> list[FoundChunk]:
    tool = turn.file_search
    assert tool is not None
    if not turn.question.strip():
        raise APIError(400, "file_search needs a user message to search for.", param="input")
    library = state.ready_library()
    threshold = None if tool.ranking is None else tool.ranking.score_threshold
    ranking = ranking_for(tool.ranking, state.settings, "tools.ranking_options")
    search = StoreSearch(
        tool.store_ids, [turn.question], tool.max_results, ranking, tool.condition, threshold
    )
    return await asyncio.to_thread(search_stores, objects_of(state, tenant), library, search)


async def _keep(
    state: AppState,
    tenant: Tenant,
    turn: ResponsesTurn,
    history: list[dict[str, Any]],
    final: dict[str, Any],
) -> None:
    """Store the finished response and its conversation, unless ``store`` is false."""
    if not turn.store or state.rag_objects is None:
        return
    turns = [*history, *turn.messages, assistant_turn(final["output"])]
    stored = StoredResponse(final["id"], final, turns)
    await asyncio.to_thread(objects_of(state, tenant).responses.save, stored)


@router.get("/v1/responses/{response_id}")
async def retrieve_response(response_id: str, objects: ProjectObjects) -> dict[str, Any]:
    stored = await asyncio.to_thread(objects.responses.get, response_id)
    if stored is None:
        raise _not_found(response_id)
    return stored.body


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, objects: ProjectObjects) -> dict[str, Any]:
    if not await asyncio.to_thread(objects.responses.delete, response_id):
        raise _not_found(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


def _not_found(response_id: str) -> APIError:
    return APIError(
        404, f"No stored response '{response_id}'.", param="response_id", code="not_found"
    )
