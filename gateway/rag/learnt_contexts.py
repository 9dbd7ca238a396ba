"""Contexts learnt from traffic (`RAGBLEND_LEARN_CONTEXTS`): chunks that keep arriving together
are precomputed in the background behind the companions they arrive with.

Sent ``documents`` are precomputed behind the fixed prefix, so a blend of them needs the
expensive cold recipe. When the same chunks arrive in the same order again and again, they are
computed once more as they stand in those requests: in one pass behind the head of the request
that queued them, each behind the chunks before it (``ChunkCache.learn``, replacing their stored
entries), and that context is recorded. Each entry then holds the KV a full prefill of such a
prompt gives its chunk. A later request whose every chunk stands where its KV was computed is
blended with the cheaper in-context recipe (`Chunks.context` "learnt"), or, when its head is
also the one they were learnt behind, reuses them with nothing recomputed ("exact"); any other
request keeps its recipe.

A request that misses every chunk of a set learns it on the spot (`learning_plan`): it computes
them all as a prefill would anyway, so its plan stores each as computed where it stands, and the
set is recorded as learnt behind its head; the next identical request is "exact". A request
that reuses some chunks stores only the missed chunks before the first reused one that way (what
stands before them is exact), the rest behind the fixed prefix.

The background work keeps out of responses' way: requests only count sightings (no I/O, no
waiting), and the single background worker starts an arrangement only while no request is
being served (a request that arrives meanwhile shares the engine with one prefill's work).
Retrieved chunks are learnt only when the library has no neighbour contexts (then they are cold
too): with neighbour contexts they already take the in-context recipe, and replacing their
entries would be undone by the library's own refreshes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from engine.chunk_cache import ChunkCache
from engine.contract import BlendStats
from gateway.http.metrics import LEARNT_CONTEXT_WORK
from gateway.rag.chunked_prompt import Chunks
from gateway.rag.idle_worker import IdleWorker
from gateway.rag.learnt_tracker import Arrangement, ContextRecords, LearningQueue

log = logging.getLogger(__name__)


class LearntContexts(IdleWorker):
    task_name = "learnt-contexts"

    def __init__(
        self,
        chunk_cache: ChunkCache,
        busy: Callable[[], bool],
        after: int,
        capacity: int,
        queue_size: int,
    ) -> None:
        """``busy``: whether requests are being served now (the worker waits until not)."""
        super().__init__(busy)
        self.chunk_cache = chunk_cache
        self.queue = LearningQueue(after, capacity, queue_size)
        self.records = ContextRecords(capacity)

    def classify(self, chunks: Chunks, salt: str = "", head: Sequence[int] = ()) -> Chunks:
        """``chunks`` as ``learnt`` when every one stands where its KV was computed under the
        chunk-KV ``salt``; else as they are, with a sighting counted when they are cold.
        ``head``: the prompt's tokens before the first chunk (what learning computes behind)."""
        if len(chunks.token_ids) < 2:
            return chunks  # a lone chunk has no companion to learn
        arrangement = Arrangement.of(chunks.token_ids, chunks.separator, salt, head)
        if self.records.all_stand_in(arrangement):
            exact = self.records.learnt_behind(arrangement)
            return replace(chunks, context="exact" if exact else "learnt")
        if chunks.context == "cold":
            outcome = self.queue.observe(arrangement)
            if outcome in ("queued", "dropped"):
                LEARNT_CONTEXT_WORK.labels(outcome).inc()
            if outcome == "queued":
                self.wake()
        return chunks

    def forget(self, evicted_keys: Iterable[str]) -> None:
        """Engine listener: chunk entries evicted from the store lose their learnt context."""
        self.records.forget_keys(evicted_keys)

    async def drain(self) -> None:
        while (job := self.queue.take()) is not None:
            try:
                learnt = await self._learn(job)
            except Exception:
                log.exception("learning the context of %d chunks failed", len(job.chunks))
                learnt = False
            finally:
                self.queue.finish(job)
            LEARNT_CONTEXT_WORK.labels("done" if learnt else "failed").inc()

    def record_learnt(self, arrangement: Arrangement, stats: BlendStats | None) -> bool:
        """Record ``arrangement``'s chunks as learnt behind its head when ``stats`` (of a request
        whose plan stores chunks behind their context) say that every one was computed in that
        pass and none was reused: each was stored as a prefill computes it there. False when
        not, or when a chunk found no room in the store (the others are recorded)."""
        chunks = len(arrangement.chunks)
        if stats is None or stats.fell_back or stats.chunks_hit or len(stats.chunk_keys) != chunks:
            return False
        stored = True
        for position, key in enumerate(stats.chunk_keys):
            if key in stats.evicted_keys:  # no room for it in the store
                stored = False
                continue
            digest, context = arrangement.digests[position], arrangement.contexts[position]
            self.records.record(digest, context, key, arrangement.head_digest)
        return stored

    async def _learn(self, job: Arrangement) -> bool:
        """Compute ``job``'s chunks behind its head in one pass, replacing their stored entries,
        and record each one's context; False if a chunk was not stored."""
        if self.records.all_stand_in(job) and self.records.learnt_behind(job):
            return True  # a request that missed every chunk learnt it meanwhile
        await self.until_idle()
        chunks = [list(chunk) for chunk in job.chunks]
        stats = await self.chunk_cache.learn(list(job.head), chunks, job.separator, job.salt)
        return self.record_learnt(job, stats)
