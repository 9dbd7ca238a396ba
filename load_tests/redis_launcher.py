"""A throwaway `redis-server` on a free loopback port, for benchmarks of the Redis chunk tier.

Benchmarks run outside pytest, so they cannot use the test fixtures; this starts Debian's
`redis-server` (`scripts/install-services.sh` installs it) with nothing persisted, waits until it
answers PING, and kills it when the block ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from load_tests.launch import free_port, launched

START_SECONDS = 10.0


class RedisUnavailable(RuntimeError):
    """redis-server is missing, exited, or did not answer in time."""


def _answers_ping(port: int) -> bool:
    import redis

    try:
        with redis.Redis(host="127.0.0.1", port=port, socket_timeout=1) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


@contextmanager
def running_redis(directory: Path, maxmemory: str = "2gb") -> Iterator[str]:
    """A started redis-server with its files under `directory`; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        install = "run `bash scripts/install-services.sh`"
        raise RedisUnavailable(f"redis-server is not installed: {install}")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [
        binary,
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(directory),
        "--save", "",
        "--appendonly", "no",
        "--maxmemory", maxmemory,
        "--maxmemory-policy", "allkeys-lru",
    ]  # fmt: skip
    log_path = directory / "redis.log"
    with launched(command, log_path, lambda: _answers_ping(port), START_SECONDS, RedisUnavailable):
        yield f"redis://127.0.0.1:{port}/0"
