"""Serve a planned turn's generation as JSON or as server-sent events, with admission, metrics
and cancellation."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from vllm.exceptions import VLLMClientError
from vllm.sampling_params import StructuredOutputsParams
from vllm.v1.engine.exceptions import EngineDeadError

from gateway.http import metrics
from gateway.http.errors import APIError
from gateway.http.shutdown import Shutdown, until_deadline
from gateway.openai.protocol import SamplingFields
from gateway.openai.sampling import default_max_tokens, sampling_params
from gateway.outputs import ChoiceDelta, FinishedChoice, Usage
from gateway.rag.generation import Generation
from gateway.rag.planned_turn import PlannedTurn
from gateway.rag.prompts import completion_budget
from gateway.state import AppState

log = logging.getLogger(__name__)

DONE = "data: [DONE]\n\n"
CLIENT_CLOSED_REQUEST = 499
DISCONNECT_POLL_SECONDS = 0.25


class BodyFormat(Protocol):
    def body(self, choices: list[FinishedChoice], usage: Usage) -> dict[str, Any]: ...


class ResponseFormat(BodyFormat, Protocol):
    def chunks(self, delta: ChoiceDelta) -> list[dict[str, Any]]: ...

    def usage_chunk(self, usage: Usage) -> dict[str, Any]: ...


def response_id(prefix: str) -> tuple[str, int]:
    return f"{prefix}-{time.time_ns():x}", int(time.time())


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def served_error(exc: Exception) -> APIError:
    """What a client is told about ``exc``; an unexpected one is logged and becomes a 500."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EngineDeadError):
        return APIError(503, "The engine has stopped; the server needs a restart.")
    if isinstance(exc, VLLMClientError):
        return APIError(400, str(exc))
    log.error("unexpected error while generating", exc_info=exc)
    return APIError(500, "Internal server error while generating.")


@dataclass(frozen=True)
class PreparedRequest:
    """A planned turn with what the route read for its sampling."""

    fields: SamplingFields
    turn: PlannedTurn
    logprobs: int | None
    arrived: float
    structured_outputs: StructuredOutputsParams | None = None
    """What decoding must follow: the JSON a required or named ``tool_choice`` asks for."""


@dataclass(frozen=True)
class StartedGeneration:
    generation: Generation
    finish: Callable[[], None]
    """Call once when the generation ends: releases admission and records metrics."""


async def respond(
    request: Request, state: AppState, prepared: PreparedRequest, response_format: ResponseFormat
) -> Response:
    """Budget the completion, admit the request and serve it as JSON or as a stream."""
    started = start_generation(request, state, prepared)
    if prepared.fields.stream:
        deadline = state.shutdown.deadline
        events = _events(started.generation, response_format, prepared, started.finish, deadline)
        return StreamingResponse(
            events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
    return await json_response(request, state, started, prepared, response_format)


async def json_response(
    request: Request,
    state: AppState,
    started: StartedGeneration,
    prepared: PreparedRequest,
    body_format: BodyFormat,
) -> Response:
    """The whole answer as JSON; the generation is aborted if the client leaves first."""
    deadline = state.shutdown.deadline
    try:
        return await _json_unless_ended(
            request, started.generation, body_format, prepared, deadline
        )
    finally:
        started.finish()


def start_generation(
    request: Request, state: AppState, prepared: PreparedRequest
) -> StartedGeneration:
    """Budget the completion and admit the request; its generation starts when iterated."""
    engine = state.ready_engine()
    fields, turn = prepared.fields, prepared.turn
    default = default_max_tokens(engine, state.settings.max_tokens_default)
    budget = min(
        completion_budget(len(ids), fields.max_tokens, engine.max_model_len, default)
        for ids in turn.prompts
    )
    params = sampling_params(fields, budget, prepared.logprobs, engine, prepared.structured_outputs)
    generation = Generation(engine, turn, params, started=prepared.arrived)
    route = metrics.route_label(request.url.path)
    state.gate.enter()
    metrics.IN_FLIGHT.labels(route).inc()
    metrics.PROMPT_TOKENS.labels(route).inc(generation.usage.prompt_tokens)

    def finish() -> None:
        state.gate.leave()
        metrics.IN_FLIGHT.labels(route).dec()
        metrics.GENERATION_TOKENS.labels(route).inc(generation.usage.completion_tokens)
        state.usage.record(turn.tenant.project, generation.usage)
        if generation.time_to_first_token is not None:
            metrics.TIME_TO_FIRST_TOKEN.labels(route).observe(generation.time_to_first_token)
        summary = generation.blend_summary()
        if summary is not None:
            metrics.record_blend(summary)
        if turn.after_blend is not None:
            turn.after_blend(generation.blend_stats)

    return StartedGeneration(generation, finish)


async def _events(
    generation: Generation,
    response_format: ResponseFormat,
    prepared: PreparedRequest,
    finish: Any,
    deadline: asyncio.Event,
) -> AsyncIterator[str]:
    """Every stream ends with ``[DONE]``; any failure, the shutdown deadline included, with an
    error event first, as OpenAI's streams do."""
    include_usage = prepared.fields.include_usage
    try:
        async with aclosing(until_deadline(generation.deltas(), deadline)) as deltas:
            async for delta in deltas:
                for chunk in response_format.chunks(delta):
                    if include_usage:
                        chunk["usage"] = None
                    yield sse(chunk)
        if include_usage:
            usage_chunk = response_format.usage_chunk(generation.usage)
            yield sse(_with_extras(usage_chunk, generation, prepared))
    except Exception as exc:
        yield sse(served_error(exc).body())
    finally:
        finish()
    yield DONE


async def _collect(
    generation: Generation, response_format: BodyFormat, prepared: PreparedRequest
) -> dict[str, Any]:
    choices: dict[int, FinishedChoice] = {}
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            choice = choices.setdefault(delta.index, FinishedChoice(delta.index))
            choice.text += delta.text
            if delta.logprobs is not None:
                choice.logprobs = (choice.logprobs or []) + delta.logprobs
            choice.finish_reason = delta.finish_reason or choice.finish_reason
    ordered = [choices[index] for index in sorted(choices)]
    return _with_extras(response_format.body(ordered, generation.usage), generation, prepared)


def _with_extras(
    payload: dict[str, Any], generation: Generation, prepared: PreparedRequest
) -> dict[str, Any]:
    """ragblend's additions: the blend summary and what retrieval used."""
    turn = prepared.turn
    summary = generation.blend_summary()
    if summary is not None and turn.pasted_passages is not None:
        summary["pasted_passages"] = turn.pasted_passages
    if summary is not None:
        payload = {**payload, "blend": summary}
    if turn.sources is not None:
        payload = {**payload, "retrieval": turn.sources}
    return payload


async def _json_unless_ended(
    request: Request,
    generation: Generation,
    response_format: BodyFormat,
    prepared: PreparedRequest,
    deadline: asyncio.Event,
) -> Response:
    """Wait for the whole answer, aborting the generation if the client goes away or the
    shutdown deadline passes first."""
    task = asyncio.create_task(_collect(generation, response_format, prepared))
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
        if done:
            break
        if deadline.is_set():
            task.cancel()
            raise Shutdown.error()
        if await request.is_disconnected():
            task.cancel()
            return Response(status_code=CLIENT_CLOSED_REQUEST)
    try:
        return JSONResponse(task.result())
    except Exception as exc:
        raise served_error(exc) from exc
