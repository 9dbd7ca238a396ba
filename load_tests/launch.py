"""Start a helper process for a benchmark, wait until it serves, stop it when the block ends.

Benchmarks run outside pytest and cannot use the test fixtures; redis-server, nginx and
`ragblend serve` replicas are started the same way: on a free loopback port, output to a log
file, ready when a probe says so, and a clear error when the process exits or never gets ready.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on the loopback `port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@contextmanager
def launched(
    command: Sequence[str],
    log_path: Path,
    ready: Callable[[], bool],
    start_seconds: float,
    failure: type[Exception],
    stop_signal: signal.Signals = signal.SIGKILL,
) -> Iterator[subprocess.Popen[bytes]]:
    """`command` running with its output in `log_path`, once `ready()`; raises `failure` with the
    log when it exits first or is not ready within `start_seconds`. Stopped with `stop_signal`,
    then killed if it has not exited 10 s later."""
    name = Path(command[0]).name
    with log_path.open("ab") as log:
        process = subprocess.Popen(list(command), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + start_seconds
        while not ready():
            if process.poll() is not None:
                raise failure(f"{name} exited: {log_path.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise failure(f"{name} was not ready within {start_seconds} s")
            time.sleep(0.05)
        yield process
    finally:
        process.send_signal(stop_signal)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
