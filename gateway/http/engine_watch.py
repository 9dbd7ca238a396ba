"""Engine death is not a zombie: when the engine stops, the server exits non-zero.

A server whose engine died can only answer 503, so it is better gone: the process exits with
status 1, as vLLM's own server does, and its supervisor (Docker's restart policy, systemd, a
Kubernetes liveness probe) starts a fresh one. The exit goes through the normal shutdown, so
in-flight streams get their error event and the data dir lock is released.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


async def wait_for_engine_death(
    is_alive: Callable[[], bool], poll_seconds: float = POLL_SECONDS
) -> None:
    """Return once ``is_alive`` turns false."""
    while is_alive():
        await asyncio.sleep(poll_seconds)


def exit_after_engine_death() -> None:
    """Ask the server to shut down; ``ragblend serve`` then exits with status 1."""
    log.error("the engine has stopped; shutting the server down so a supervisor restarts it")
    os.kill(os.getpid(), signal.SIGTERM)
