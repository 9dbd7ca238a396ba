"""The replica front (docker/nginx.conf, run by Debian's nginx through load_tests/nginx_front.py)
in front of two small HTTP servers standing in for replicas: streamed answers reach the client
before they end, a replica busy with a long request gets no new ones while the other is idle,
large bodies are left for the replica to judge, and every answer names the replica that sent it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from load_tests.nginx_front import running_front

HANG_GUARD_SECONDS = 30.0


class Replica(ThreadingHTTPServer):
    """A stand-in replica on a free loopback port, whose handlers wait on the test's events."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReplicaHandler)
        self.first_event_seen = threading.Event()
        self.holding = threading.Event()
        self.release = threading.Event()
        self.stream_acknowledged = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class ReplicaHandler(BaseHTTPRequestHandler):
    server: Replica

    def log_message(self, *_: object) -> None:
        pass

    def _reply(self, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/hold":
            self.server.holding.set()
            self.server.release.wait(HANG_GUARD_SECONDS)
            self._reply(b"held")
        elif self.path == "/stream":
            self._stream()
        else:
            self._reply(self.server.address.encode())

    def _stream(self) -> None:
        """One SSE event, then the rest only once the client has seen that one (or never)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b'data: {"token": "first"}\n\n')
        self.wfile.flush()
        acknowledged = self.server.first_event_seen.wait(HANG_GUARD_SECONDS)
        self.server.stream_acknowledged = acknowledged
        self.wfile.write(b'data: {"token": "second"}\n\ndata: [DONE]\n\n')
        self.close_connection = True

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        received = 0
        while received < length:
            received += len(self.rfile.read(min(1 << 16, length - received)))
        self._reply(str(received).encode())


@pytest.fixture
def replicas() -> Iterator[tuple[Replica, Replica]]:
    pair = (Replica(), Replica())
    for replica in pair:
        threading.Thread(target=replica.serve_forever, daemon=True).start()
    yield pair
    for replica in pair:
        replica.release.set()
        replica.first_event_seen.set()
        replica.shutdown()
        replica.server_close()


@pytest.fixture
def front(replicas: tuple[Replica, Replica], tmp_path: Path) -> Iterator[str]:
    with running_front([replica.address for replica in replicas], tmp_path) as url:
        yield url


def test_a_streamed_answer_reaches_the_client_event_by_event(
    replicas: tuple[Replica, Replica], front: str
) -> None:
    events: list[str] = []
    with httpx.stream("GET", f"{front}/stream", timeout=HANG_GUARD_SECONDS * 2) as reply:
        assert reply.headers["content-type"] == "text/event-stream"
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
                for replica in replicas:
                    replica.first_event_seen.set()
    assert events == ['{"token": "first"}', '{"token": "second"}', "[DONE]"]
    assert any(replica.stream_acknowledged for replica in replicas), (
        "the first event reached the client only after the replica had sent the whole answer"
    )


def replica_holding(replicas: tuple[Replica, Replica]) -> Replica:
    """The replica that received the long request (fails after the hang guard)."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while time.monotonic() < deadline:
        for replica in replicas:
            if replica.holding.is_set():
                return replica
        time.sleep(0.01)
    pytest.fail("the long request reached no replica")


def test_a_replica_busy_with_a_long_request_gets_no_new_ones_while_the_other_is_idle(
    replicas: tuple[Replica, Replica], front: str
) -> None:
    held = threading.Thread(target=httpx.get, args=(f"{front}/hold",), kwargs={"timeout": 60})
    held.start()
    try:
        busy = replica_holding(replicas)
        idle = next(replica for replica in replicas if replica is not busy)
        answered_by = {httpx.get(f"{front}/who").text for _ in range(6)}
        assert answered_by == {idle.address}
    finally:
        for replica in replicas:
            replica.release.set()
        held.join(timeout=HANG_GUARD_SECONDS)
    answered_by = {httpx.get(f"{front}/who").text for _ in range(6)}
    assert answered_by == {replica.address for replica in replicas}, "both serve once idle"


def test_every_answer_names_the_replica_that_sent_it(front: str) -> None:
    for _ in range(4):
        reply = httpx.get(f"{front}/who")
        assert reply.headers["x-ragblend-replica"] == reply.text


def test_a_body_beyond_nginx_default_limit_is_passed_to_the_replica(front: str) -> None:
    body = b"x" * (3 << 20)  # nginx alone would answer 413 above 1 MiB
    reply = httpx.post(f"{front}/upload", content=body, timeout=HANG_GUARD_SECONDS)
    assert reply.status_code == 200 and reply.text == str(len(body))
