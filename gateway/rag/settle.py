"""Chunks a first sighting stored in its own context, recomputed behind the fixed prefix later.

A request that misses its chunks computes them exactly, as a prefill of its prompt would, and
the worker stores each one as computed there (keys moved to where the prefix ends): the first
sighting then costs one prefill, not a prefill plus every chunk computed again behind the fixed
chunk prefix. But KV that has seen one arrangement's other passages may blend worse into
another arrangement than KV behind the neutral prefix (0.046 F1 lower at the cold recipe on 100
held-out items, within noise: docs/benchmarks.md, "First sight at one prefill"), and the prefix
form is the one the recipes were validated on, so it is still what later requests should find.
This computes it off every request's path: the worker names the chunks it stored in context
(`BlendStats.stored_in_context`), and one background task recomputes each behind the prefix
(`ChunkCache.precompute` replacing the entry; requests meanwhile hit the in-context one), only
while no request is being served.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

from engine.chunk_cache import ChunkCache
from engine.contract import BlendStats
from gateway.http.metrics import SETTLED_CHUNKS
from gateway.rag.idle_worker import IdleWorker

log = logging.getLogger(__name__)
QUEUE_CHUNKS = 1024
"""Chunks waiting to settle at most (each tuple of ids costs about 36 bytes a token)."""
Pending = tuple[str, tuple[int, ...]]
"""A chunk to settle: its KV salt and its token ids."""


class PrefixSettler(IdleWorker):
    task_name = "settle-behind-prefix"

    def __init__(
        self, chunk_cache: ChunkCache, busy: Callable[[], bool], capacity: int = QUEUE_CHUNKS
    ) -> None:
        """``busy``: whether requests are being served now (the task waits until not);
        ``capacity``: chunks waiting at most (one more is dropped and counted)."""
        super().__init__(busy)
        self.chunk_cache = chunk_cache
        self.capacity = capacity
        self._pending: OrderedDict[Pending, None] = OrderedDict()

    def after_blend(
        self, chunks: Sequence[Sequence[int]], salt: str, stats: BlendStats | None
    ) -> None:
        """A request ended (event loop): queue those of its ``chunks`` (token ids of each span
        of its plan; an empty one is never settled) that the worker stored in the request's own
        context."""
        if stats is None or stats.fell_back:
            return
        for position in stats.stored_in_context:
            if position >= len(chunks) or not chunks[position]:
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
            self.wake()

    @property
    def waiting(self) -> int:
        return len(self._pending)

    async def drain(self) -> None:
        while self._pending:
            await self.until_idle()
            (salt, chunk), _ = self._pending.popitem(last=False)
            try:
                await self.chunk_cache.precompute(list(chunk), replace=True, salt=salt)
                SETTLED_CHUNKS.labels("done").inc()
            except Exception:
                log.exception("settling a chunk of %d tokens failed", len(chunk))
                SETTLED_CHUNKS.labels("failed").inc()
