"""What the worker reports for each job: the ``BlendStats`` the front end gets per request."""

from __future__ import annotations

from engine.blend.fuse import BlendResult
from engine.connector.metadata import BlendJob
from engine.connector.placement import Placement
from engine.contract import BlendStats
from engine.kvstore.store import ChunkKVStore


def blended(
    job: BlendJob, placement: Placement, result: BlendResult, store: ChunkKVStore, prefix: list[int]
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
        evicted_keys=tuple(store.take_lost_keys()),
        stored_in_context=placement.stored_in_context(job, prefix),
        hit_positions=tuple(placement.hit_positions),
        store=store.stats(),
    )


def captured(
    job: BlendJob, placement: Placement, store: ChunkKVStore, prefix: list[int]
) -> BlendStats:
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
        evicted_keys=tuple(store.take_lost_keys()),
        stored_in_context=placement.stored_in_context(job, prefix),
        store=store.stats(),
    )


def fell_back(job: BlendJob, store: ChunkKVStore) -> BlendStats:
    """A job whose blend failed, its claimed region computed exactly; nothing stored."""
    return BlendStats(
        mode=job.plan.recipe.mode,
        reused_tokens=0,
        recomputed_tokens=job.claim_end - job.num_local_cached,
        chunks_hit=0,
        chunks_missed=len(job.plan.spans),
        prefix_cached_tokens=job.num_local_cached,
        fell_back=True,
        evicted_keys=tuple(store.take_lost_keys()),
        store=store.stats(),
    )
