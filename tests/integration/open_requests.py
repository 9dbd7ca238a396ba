"""A server stopped by SIGTERM while it answers two long requests, one streamed, and a client
holds a kept-alive connection: what each of them got (`test_server_lives.py` checks it)."""

from __future__ import annotations

import re
import signal
import threading
import time
from dataclasses import dataclass

import httpx
import pytest

from tests.integration.conftest import Server

COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"
"""A prompt the model continues for far longer than the deadline."""


def _long_request(server: Server, stream: bool) -> dict:
    return {
        "model": server.model,
        "prompt": COUNTING,
        "max_tokens": 1500,
        "temperature": 0,
        "stream": stream,
    }


def _in_flight(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    pattern = r'^ragblend_requests_in_flight\{route="/v1/completions"\} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _wait_for_in_flight(server: Server, count: int) -> None:
    for _ in range(600):
        if _in_flight(server) >= count:
            return
        time.sleep(0.1)
    pytest.fail(f"{count} requests never were in flight")


def _health_once_stopping(client: httpx.Client) -> httpx.Response:
    """``/health`` on ``client``'s kept-alive connection once the server has seen the signal."""
    for _ in range(50):
        reply = client.get("/health")
        if reply.status_code != 200:
            return reply
        time.sleep(0.01)
    pytest.fail("the server never said it was shutting down")


@dataclass(frozen=True)
class Stopped:
    events: list[str]
    """The streamed request's non-empty lines, the last ones sent after the signal."""
    waiting: httpx.Response
    """The non-streamed request's reply."""
    stopping: httpx.Response
    """``/health`` on the kept-alive connection once the server had seen the signal."""


def sigterm_with_open_requests(server: Server) -> Stopped:
    """SIGTERM `server` while two long requests are in flight; returns once it has exited."""
    assert server.process is not None
    waiting: dict[str, httpx.Response] = {}

    def non_streamed() -> None:
        with server.client() as client:
            waiting["reply"] = client.post("/v1/completions", json=_long_request(server, False))

    thread = threading.Thread(target=non_streamed)
    thread.start()
    with (
        server.client() as kept_alive,
        server.client() as client,
        client.stream("POST", "/v1/completions", json=_long_request(server, True)) as reply,
    ):
        assert reply.status_code == 200
        lines = reply.iter_lines()
        first = next(line for line in lines if line)
        _wait_for_in_flight(server, 2)
        assert kept_alive.get("/health").json()["status"] == "ready"
        server.process.send_signal(signal.SIGTERM)
        stopping = _health_once_stopping(kept_alive)
        events = [first, *(line for line in lines if line)]
    thread.join()
    server.process.wait(timeout=60)
    return Stopped(events, waiting["reply"], stopping)
