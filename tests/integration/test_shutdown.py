"""SIGTERM with open requests: they run until the shutdown deadline, then the stream ends with an
error event and ``[DONE]``, the waiting request gets a 503, and the server exits. A client's
kept-alive connection is still answered just after the signal, and told to close."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Server, running_server

pytestmark = pytest.mark.integration

SHUTDOWN_TIMEOUT = 3
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


def test_sigterm_ends_open_requests_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBLEND_SHUTDOWN_TIMEOUT", str(SHUTDOWN_TIMEOUT))
    with running_server(tmp_path) as server:
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

    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2].removeprefix("data: "))["error"]
    assert (error["type"], error["code"]) == ("service_unavailable_error", "server_shutting_down")
    assert len(events) > 3  # tokens kept coming after the signal, until the deadline
    reply = waiting["reply"]
    assert reply.status_code == 503
    assert reply.json()["error"]["code"] == "server_shutting_down"
    assert (stopping.status_code, stopping.json()["status"]) == (503, "shutting down")
    assert stopping.headers["connection"] == "close"
    log = server.log.read_text()
    assert "timeout graceful shutdown exceeded" not in log  # ended by the app, not cut by uvicorn
