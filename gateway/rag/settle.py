"""Chunks a first sighting stored in its own context, recomputed behind the fixed prefix later.

A request that misses its chunks computes them exactly, as a prefill of its prompt would, and
the worker stores each one as computed there (keys moved to where the prefix ends): the first
sighting then costs one prefill, not a prefill plus every chunk computed again behind the fixed
chunk prefix. But KV that has seen one arrangement's other passages blends worse into another
arrangement than KV computed behind the neutral prefix does (measured: in docs/benchmarks.md,
"First sight at one prefill"), so the prefix form is still what later requests should find.
This computes it off every request's path: the worker names the chunks it stored in context
(`BlendStats.stored_in_context`), and one background task recomputes each behind the prefix
(`ChunkCache.precompute` replacing the entry; requests meanwhile hit the in-context one), only
while no request is being served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

from engine.chunk_cache import ChunkCache
from engine.contract import BlendStats
from gateway.http.metrics import SETTLED_CHUNKS

log = logging.getLogger(__name__)
IDLE_POLL_SECONDS = 0.05
"""How often the task looks whether live requests are done before its next chunk."""
Pending = tuple[str, tuple[int, ...]]
"""A chunk to settle: its KV salt and its token ids."""


class PrefixSettler:
    def __init__(self, chunk_cache: ChunkCache, busy: Callable[[], bool], capacity: int) -> None:
        """``busy``: whether requests are being served now (the task waits until not);
        ``capacity``: chunks waiting at most (one more is dropped and counted)."""
        self.chunk_cache = chunk_cache
        self.busy = busy
        self.capacity = capacity
        self._pending: OrderedDict[Pending, None] = OrderedDict()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def after_blend(
        self, chunks: Sequence[Sequence[int]], salt: str, stats: BlendStats | None
    ) -> None:
        """A request ended (event loop): queue those of its ``chunks`` (token ids in prompt
        order) that the worker stored in the request's own context."""
        if stats is None or stats.fell_back:
            return
        for position in stats.stored_in_context:
            if position >= len(chunks):
                continue
            chunk = (salt, tuple(chunks[position]))
            if chunk in self._pending:
                continue
            if len(self._pending) >= self.capacity:
                SETTLED_CHUNKS.labels("dropped").inc()
                continue
            self._pending[chunk] = None
            SETTLED_CHUNKS.labels("queued").inc()
        if self._pending:
            self._wake.set()

    @property
    def waiting(self) -> int:
        return len(self._pending)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="settle-behind-prefix")

    async def stop(self) -> None:
        """Stops at once; a chunk being computed is abandoned (its in-context entry stays)."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                await self._until_idle()
                (salt, chunk), _ = self._pending.popitem(last=False)
                try:
                    await self.chunk_cache.precompute(list(chunk), replace=True, salt=salt)
                    SETTLED_CHUNKS.labels("done").inc()
                except Exception:
                    log.exception("settling a chunk of %d tokens failed", len(chunk))
                    SETTLED_CHUNKS.labels("failed").inc()

    async def _until_idle(self) -> None:
        while self.busy():
            await asyncio.sleep(IDLE_POLL_SECONDS)
