"""A real `redis-server` on a free loopback port, for tests of the shared chunk-KV tier.

Tests start one per test (or module), kill it to simulate an outage, and start it again on the
same port to see the tier recover. Nothing is persisted: no RDB snapshot, no append-only file.
`scripts/install-services.sh` installs Debian's redis-server where it is missing.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

START_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server process on 127.0.0.1:`port`, with its working files under `directory`."""

    def __init__(
        self, directory: Path, maxmemory: str = "64mb", policy: str = "allkeys-lru"
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: run `bash scripts/install-services.sh`")
        self.binary = binary
        self.directory = directory
        self.maxmemory = maxmemory
        self.policy = policy
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers PING."""
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--maxmemory", self.maxmemory,
            "--maxmemory-policy", self.policy,
        ]  # fmt: skip
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"redis-server exited: {(self.directory / 'redis.log').read_text()}")
            if self.ping():
                return
            time.sleep(0.05)
        pytest.fail(f"redis-server did not answer within {START_SECONDS} s")

    def kill(self) -> None:
        """Stop the server at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        """A plain client, for tests that inspect or damage what the tier stored."""
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def ping(self) -> bool:
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.RedisError:
            return False


class LatencyProxy:
    """A loopback TCP proxy to `port` that holds every client request for `delay_s` first: a
    Redis across a slow link. Change `delay_s` at any time; `close` stops it."""

    def __init__(self, port: int, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self._target))
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, delayed: bool) -> None:
        with source, sink:
            while not self._closed.is_set():
                try:
                    data = source.recv(1 << 16)
                    if not data:
                        return
                    if delayed and self.delay_s > 0:
                        self._closed.wait(self.delay_s)
                    sink.sendall(data)
                except OSError:
                    return

    def close(self) -> None:
        self._closed.set()
        self._listener.close()


@contextmanager
def running_redis(
    directory: Path, maxmemory: str = "64mb", policy: str = "allkeys-lru"
) -> Iterator[RedisServer]:
    """A started `RedisServer`, killed when the block ends."""
    server = RedisServer(directory, maxmemory, policy)
    server.start()
    try:
        yield server
    finally:
        server.kill()
