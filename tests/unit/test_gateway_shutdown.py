"""Streams always end with an error event then ``[DONE]``; the shutdown deadline ends them; a stop
signal drains kept-alive connections before uvicorn closes them."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import uvicorn
from vllm import SamplingParams
from vllm.v1.engine.exceptions import EngineDeadError

from gateway.cli.main import server_config
from gateway.http.errors import APIError
from gateway.http.shutdown import (
    CloseConnectionsWhenStopping,
    GracefulServer,
    Shutdown,
    until_deadline,
)
from gateway.openai.protocol import CompletionRequest
from gateway.rag.generation import Generation
from gateway.rag.planned_turn import PlannedTurn
from gateway.routes.completions import CompletionFormat
from gateway.serve.respond import DONE, PreparedRequest, _events, served_error
from gateway.settings import Settings
from retriever import Tenant
from tests.redis_server import free_port
from tests.unit.graceful_server_main import plain_text_app


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
    turn = PlannedTurn(Tenant("default", ""), [[1, 2]])
    generation = Generation(no_engine, turn, SamplingParams(max_tokens=1))
    prepared = PreparedRequest(fields, turn, None, arrived=0.0)
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


async def test_a_stop_signal_drains_before_uvicorn_stops() -> None:
    """The app's shutdown begins at the signal; uvicorn's stop (listener and idle kept-alive
    connections closed) only after the drain, so uvicorn's deadline is the rest of the timeout."""
    shutdown = Shutdown(timeout_s=0.4)
    server = GracefulServer(uvicorn.Config(_no_app), shutdown)
    assert server.config.timeout_graceful_shutdown == pytest.approx(0.2)
    server.loop = asyncio.get_running_loop()
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.sleep(0.01)
    assert shutdown.begun and not server.should_exit
    await asyncio.sleep(shutdown.drain_s)
    assert server.should_exit and not server.force_exit


@pytest.fixture
def sigterm_kept_from_pytest() -> Iterator[None]:
    """uvicorn raises the signal that stopped it again once stopped: here it must not end the
    test run, so SIGTERM does nothing meanwhile (uvicorn's own handler is in place while it
    serves)."""
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    yield
    signal.signal(signal.SIGTERM, previous)


async def _serving(timeout_s: float) -> tuple[GracefulServer, Settings, asyncio.Task[None]]:
    settings = Settings(model="m", port=free_port())
    server = GracefulServer(server_config(plain_text_app, settings), Shutdown(timeout_s))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return server, settings, serving


@pytest.mark.usefixtures("sigterm_kept_from_pytest")
async def test_with_no_connection_open_the_drain_ends_after_a_quiet_second() -> None:
    server, _, serving = await _serving(timeout_s=8.0)  # a 4 s drain
    started = time.monotonic()
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(serving, 3.0)
    assert 1.0 <= time.monotonic() - started < 3.0


@pytest.mark.usefixtures("sigterm_kept_from_pytest")
async def test_a_kept_alive_connection_keeps_the_drain_going_until_it_closes() -> None:
    server, settings, serving = await _serving(timeout_s=8.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", settings.port)
    writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
    await writer.drain()
    await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)  # served, kept alive
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.sleep(2.0)
    assert not server.should_exit  # the connection is open: its client may send on it
    writer.close()
    closed = time.monotonic()
    await asyncio.wait_for(serving, 3.0)
    assert time.monotonic() - closed >= 1.0


async def test_a_second_signal_ends_the_drain_at_once() -> None:
    shutdown = Shutdown(timeout_s=8.0)
    server = GracefulServer(uvicorn.Config(_no_app), shutdown)
    server.loop = asyncio.get_running_loop()
    server.handle_exit(signal.SIGINT, None)
    await asyncio.sleep(0.01)
    server.handle_exit(signal.SIGINT, None)
    assert server.should_exit and not server.force_exit
    assert server.end_of_drain is not None and server.end_of_drain.cancelled()


def test_ctrl_c_stops_the_server_quietly_with_status_zero() -> None:
    """uvicorn raises the signal that stopped it again once it has; for Ctrl-C that is a
    KeyboardInterrupt, which must not end ``ragblend serve`` in a traceback and a failure."""
    port = free_port()
    command = [sys.executable, "-m", "tests.unit.graceful_server_main", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/").text == "ok":
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            pytest.fail("the server never answered")
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    finally:
        process.kill()
    assert "Finished server process" in errors  # stopped by its own graceful path
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors
    assert process.returncode == 0


async def test_responses_say_connection_close_once_the_shutdown_began() -> None:
    shutdown = Shutdown(timeout_s=8.0)
    app = CloseConnectionsWhenStopping(plain_text_app, shutdown)
    first, _ = await _response_start(app)
    shutdown.begin()
    second, _ = await _response_start(app)
    assert (b"connection", b"close") not in first["headers"]
    assert (b"connection", b"close") in second["headers"]
    assert (b"content-type", b"text/plain") in second["headers"]


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("not called")


async def _response_start(app: Any) -> tuple[dict, list[dict]]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": "/"}, receive, send)
    return sent[0], sent


async def test_a_kept_alive_connection_outlives_the_clients_idle_expiry() -> None:
    """uvicorn's own default (5 s) closes an idle connection just when an httpx client (5 s too)
    may send on it; `RAGBLEND_KEEP_ALIVE_S` keeps it longer, so the client is the one to close."""
    server, settings, serving = await _serving(timeout_s=1.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", settings.port)
    for pause in (0.0, 5.5):
        await asyncio.sleep(pause)
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)  # the chunked body's end
    writer.close()
    server.should_exit = True
    await serving
