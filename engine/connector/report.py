"""What the worker reports: the ``BlendStats`` the front end gets per request, and the chunk
store's evictions, posted by `Reporter`."""

from __future__ import annotations

import threading
from dataclasses import replace

from engine.blend.fuse import BlendResult
from engine.connector.metadata import BlendJob
from engine.connector.placement import Placement
from engine.connector.stats import StatsOutbox
from engine.contract import BlendStats, StoreEvictions
from engine.kvstore.store import ChunkKVStore


class Reporter:
    """Posts a job's statistics, and the evictions a slower tier's writer makes between jobs,
    each with the keys the store lost since the last post. Taking the keys and posting happen
    under one lock: a key lost and then stored again is never reported lost after the report
    that holds it again."""

    def __init__(self, store: ChunkKVStore, outbox: StatsOutbox) -> None:
        self._store = store
        self._outbox = outbox
        self._lock = threading.Lock()

    def job(self, stats_id: str, stats: BlendStats) -> None:
        """Engine thread, after the job's chunks were stored."""
        with self._lock:
            lost = tuple(self._store.take_lost_keys())
            stats = replace(stats, evicted_keys=lost, store=self._store.stats())
            self._outbox.post(stats_id, stats)

    def evictions(self) -> None:
        """A writer thread, after it stored an entry: posts what that evicted, if anything."""
        with self._lock:
            lost = tuple(self._store.take_lost_keys())
            if lost:
                self._outbox.post_evictions(StoreEvictions(lost, self._store.stats()))

    def close(self) -> None:
        self._outbox.close()


def blended(
    job: BlendJob, placement: Placement, result: BlendResult, prefix: list[int]
) -> BlendStats:
    """A job the blend filled (hits, misses or both)."""
    # Positions before num_local_cached came from vLLM's prefix cache, not from this blend.
    return BlendStats(
        mode=job.plan.recipe.mode,
        reused_tokens=result.reused_from(job.num_local_cached),
        recomputed_tokens=result.recomputed_from(job.num_local_cached),
        chunks_hit=len(placement.hits),
        chunks_missed=len(placement.captures),
        prefix_cached_tokens=job.num_local_cached,
        rejected_chunks=placement.rejected,
        chunk_keys=tuple(placement.keys),
        stored_in_context=placement.stored_in_context(job, prefix),
        hit_positions=tuple(placement.hit_positions),
    )


def captured(job: BlendJob, placement: Placement, prefix: list[int]) -> BlendStats:
    """A first sighting vLLM prefilled, its chunks copied out of the paged cache: nothing
    reused, the chunk region computed past vLLM's prefix hit."""
    return BlendStats(
        mode=job.plan.recipe.mode,
        reused_tokens=0,
        recomputed_tokens=job.claim_end - job.num_local_cached,
        chunks_hit=0,
        chunks_missed=len(placement.captures),
        prefix_cached_tokens=job.num_local_cached,
        chunk_keys=tuple(placement.keys),
        stored_in_context=placement.stored_in_context(job, prefix),
    )


def fell_back(job: BlendJob) -> BlendStats:
    """A job whose blend failed, its claimed region computed exactly; nothing stored."""
    return BlendStats(
        mode=job.plan.recipe.mode,
        reused_tokens=0,
        recomputed_tokens=job.claim_end - job.num_local_cached,
        chunks_hit=0,
        chunks_missed=len(job.plan.spans),
        prefix_cached_tokens=job.num_local_cached,
        fell_back=True,
    )
