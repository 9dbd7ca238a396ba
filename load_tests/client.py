"""Concurrent streaming clients that replay prompts against an OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from load_tests.sse import (
    STREAM_DONE,
    Endpoint,
    MalformedChunkError,
    chunk_completion_tokens,
    chunk_has_error,
    chunk_prompt_usage,
    chunk_text,
    decode_chunk,
    parse_sse_data,
)
from load_tests.stats import RequestRecord

ENDPOINT_PATHS: dict[Endpoint, str] = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
}


@dataclass(frozen=True)
class LoadPlan:
    """What every request of a run shares."""

    endpoint: Endpoint
    model: str
    max_tokens: int
    prompts: Sequence[str]
    request_timeout_s: float
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Fields added to every request (e.g. ``retrieval`` and ``blend``)."""


class NoServedModelError(RuntimeError):
    """``GET /v1/models`` listed nothing to send requests to."""


class RequestBudget:
    """Hands out request slots until either the count or the deadline runs out.

    ``deadline`` is a :func:`time.perf_counter` reading.
    """

    def __init__(self, max_requests: int, deadline: float) -> None:
        self._remaining = max_requests
        self._deadline = deadline

    @property
    def deadline(self) -> float:
        return self._deadline

    def take(self) -> bool:
        if self._remaining <= 0 or time.perf_counter() >= self._deadline:
            return False
        self._remaining -= 1
        return True


def request_body(plan: LoadPlan, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": plan.model,
        "max_tokens": plan.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if plan.endpoint == "completions":
        body["prompt"] = prompt
    else:
        body["messages"] = [{"role": "user", "content": prompt}]
    return {**body, **plan.extra_body}


async def wait_until_ready(client: httpx.AsyncClient, timeout_s: float) -> None:
    """Poll ``GET /health`` until the server reports ready (200); raise after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if (await client.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the server was not ready within {timeout_s:g} s")
        await asyncio.sleep(1)


async def first_served_model(client: httpx.AsyncClient) -> str:
    """The first model id that ``GET /v1/models`` lists."""
    response = await client.get("/v1/models")
    response.raise_for_status()
    models = response.json().get("data") or []
    if not models:
        raise NoServedModelError("the server lists no models; pass --model")
    return str(models[0]["id"])


@dataclass
class _StreamTally:
    """Running measurements of one streamed response."""

    endpoint: Endpoint
    started: float
    ttft_s: float | None = None
    content_chunks: int = 0
    reported_tokens: int | None = None
    prompt_usage: tuple[int, int] = (0, 0)

    def observe(self, chunk: dict[str, Any]) -> None:
        if chunk_text(chunk, self.endpoint):
            self.content_chunks += 1
            if self.ttft_s is None:
                self.ttft_s = time.perf_counter() - self.started
        usage_tokens = chunk_completion_tokens(chunk)
        if usage_tokens is not None:
            self.reported_tokens = usage_tokens
        self.prompt_usage = chunk_prompt_usage(chunk) or self.prompt_usage

    def finished(self) -> RequestRecord:
        """Record of a complete stream; usage counts win over counted content chunks."""
        tokens = self.content_chunks if self.reported_tokens is None else self.reported_tokens
        prompt_tokens, cached_tokens = self.prompt_usage
        return RequestRecord(
            latency_s=time.perf_counter() - self.started,
            ttft_s=self.ttft_s,
            output_tokens=tokens,
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
        )

    def failed(self, error: str) -> RequestRecord:
        return RequestRecord(latency_s=time.perf_counter() - self.started, error=error)


async def _consume_stream(
    client: httpx.AsyncClient, plan: LoadPlan, prompt: str, tally: _StreamTally
) -> RequestRecord:
    path = ENDPOINT_PATHS[plan.endpoint]
    async with client.stream("POST", path, json=request_body(plan, prompt)) as response:
        if not response.is_success:
            await response.aread()
            return tally.failed(str(response.status_code))
        async for line in response.aiter_lines():
            payload = parse_sse_data(line)
            if payload is None:
                continue
            if payload == STREAM_DONE:
                return tally.finished()
            try:
                chunk = decode_chunk(payload)
            except MalformedChunkError:
                return tally.failed("malformed_chunk")
            if chunk_has_error(chunk):
                return tally.failed("stream_error")
            tally.observe(chunk)
    return tally.failed("incomplete_stream")


async def stream_request(client: httpx.AsyncClient, plan: LoadPlan, prompt: str) -> RequestRecord:
    """Send one streaming request and measure it; failures become records, never exceptions."""
    tally = _StreamTally(endpoint=plan.endpoint, started=time.perf_counter())
    try:
        async with asyncio.timeout(plan.request_timeout_s):
            return await _consume_stream(client, plan, prompt, tally)
    except TimeoutError:
        return tally.failed("timeout")
    except httpx.HTTPError as exc:
        return tally.failed(type(exc).__name__)


async def _client_loop(
    client: httpx.AsyncClient, plan: LoadPlan, budget: RequestBudget, first_prompt: int, stride: int
) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    prompt_index = first_prompt
    while budget.take():
        prompt = plan.prompts[prompt_index % len(plan.prompts)]
        prompt_index += stride
        records.append(await stream_request(client, plan, prompt))
    return records


async def run_load(
    client: httpx.AsyncClient, plan: LoadPlan, concurrency: int, budget: RequestBudget
) -> tuple[list[RequestRecord], float]:
    """Run ``concurrency`` request loops until the budget is spent; return records and wall time.

    Each loop starts at its own prompt so that concurrent requests differ.
    """
    started = time.perf_counter()
    per_client = await asyncio.gather(
        *(_client_loop(client, plan, budget, index, concurrency) for index in range(concurrency))
    )
    elapsed_s = time.perf_counter() - started
    return [record for records in per_client for record in records], elapsed_s
