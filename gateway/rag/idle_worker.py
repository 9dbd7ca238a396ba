"""One background task that does queued work only while no request is being served.

Work that helps later requests (learning a context, settling a first sighting's chunks behind
the prefix) goes through the same engine as the requests themselves; started while a request
is served, it would share the engine with it and delay its answer. A subclass queues its work
and calls `wake`; `drain` does what is queued, calling `until_idle` before each piece.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

IDLE_POLL_SECONDS = 0.05
"""How often the task looks whether live requests are done before its next piece of work."""


class IdleWorker:
    task_name = "idle-worker"

    def __init__(self, busy: Callable[[], bool]) -> None:
        """``busy``: whether requests are being served now (work waits until not)."""
        self.busy = busy
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        """Stops at once; the piece of work in progress is abandoned."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def drain(self) -> None:
        """Do everything queued (the subclass's work)."""
        raise NotImplementedError

    async def until_idle(self) -> None:
        while self.busy():
            await asyncio.sleep(IDLE_POLL_SECONDS)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.drain()
