"""Streams always end with an error event then ``[DONE]``; the shutdown deadline ends them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import pytest
from vllm import SamplingParams
from vllm.v1.engine.exceptions import EngineDeadError

from gateway.http.errors import APIError
from gateway.http.serving import DONE, PreparedRequest, _events, served_error
from gateway.http.shutdown import Shutdown, until_deadline
from gateway.openai.protocol import CompletionRequest
from gateway.rag.generation import Generation
from gateway.routes.completions import CompletionFormat


class Ticker:
    """Yields ``ticks`` items at once, then waits forever; records whether it was closed."""

    def __init__(self, ticks: int) -> None:
        self.ticks = ticks
        self.closed = False

    async def items(self) -> AsyncGenerator[int, None]:
        try:
            for tick in range(self.ticks):
                yield tick
            await asyncio.Event().wait()
        finally:
            self.closed = True


async def test_deadline_ends_a_waiting_stream_and_closes_it() -> None:
    ticker, deadline, seen = Ticker(2), asyncio.Event(), []
    with pytest.raises(APIError) as caught:
        async for item in until_deadline(ticker.items(), deadline):
            seen.append(item)
            if len(seen) == 2:
                asyncio.get_running_loop().call_soon(deadline.set)
    assert seen == [0, 1]
    assert (caught.value.status, caught.value.code) == (503, "server_shutting_down")
    await asyncio.sleep(0)  # the cancelled step closes the generator from inside
    assert ticker.closed


async def test_items_that_end_before_the_deadline_pass_through() -> None:
    async def three() -> AsyncGenerator[int, None]:
        for item in range(3):
            yield item

    assert [item async for item in until_deadline(three(), asyncio.Event())] == [0, 1, 2]


async def test_a_consumer_that_stops_early_closes_the_items() -> None:
    ticker = Ticker(5)
    async with aclosing(until_deadline(ticker.items(), asyncio.Event())) as items:
        async for _ in items:
            break
    assert ticker.closed


async def test_shutdown_sets_the_deadline_after_its_grace() -> None:
    shutdown = Shutdown(timeout_s=0.0)
    assert shutdown.grace_s == 0.0 and not shutdown.deadline.is_set()
    shutdown.begin()
    await asyncio.wait_for(shutdown.deadline.wait(), timeout=5)
    assert Shutdown(timeout_s=8.0).grace_s == 7.0


async def test_an_error_before_the_first_delta_ends_the_stream_with_an_event_and_done() -> None:
    """A generation without an engine fails unexpectedly at its first step."""
    fields = CompletionRequest(model="m", prompt="p", stream=True)
    no_engine: Any = None
    generation = Generation(no_engine, [[1, 2]], SamplingParams(max_tokens=1))
    prepared = PreparedRequest(fields, [[1, 2]], None, None, arrived=0.0)
    finished: list[bool] = []
    events = _events(
        generation,
        CompletionFormat("cmpl-1", 0, "m"),
        prepared,
        lambda: finished.append(True),
        asyncio.Event(),
    )
    received = [event async for event in events]
    assert received[-1] == DONE
    error = json.loads(received[-2].removeprefix("data: "))["error"]
    assert (error["type"], error["message"]) == (
        "server_error",
        "Internal server error while generating.",
    )
    assert finished == [True]


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (APIError(400, "bad"), 400),
        (EngineDeadError(), 503),
        (RuntimeError("anything"), 500),
    ],
)
def test_served_errors(exc: Exception, status: int) -> None:
    assert served_error(exc).status == status
