"""What crosses between the scheduler and worker halves of the connector (pickled), and what
a job implies: its cache slots and the positions it can skip."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from engine.contract import QUESTION_METRICS, BlendPlan, Eviction, Recipe


@dataclass(frozen=True)
class BlendJob:
    """One newly scheduled request whose first ``claim_end`` prompt tokens the worker fills."""

    request_id: str
    plan: BlendPlan
    token_ids: list[int]
    num_local_cached: int
    """Leading tokens vLLM's own prefix cache already holds; their slots are not rewritten."""
    claim_end: int
    block_ids: list[int] = field(default_factory=list)
    """Set by the scheduler when the request is scheduled (``dataclasses.replace``)."""

    def slots(self, block_size: int, device: torch.device) -> Tensor:
        """Paged-cache slots of the positions this job writes: num_local_cached..claim_end."""
        positions = torch.arange(self.num_local_cached, self.claim_end)
        blocks = torch.tensor(self.block_ids)[positions // block_size]
        return (blocks * block_size + positions % block_size).to(device)

    def behind_ready_blocks(self, busy: Collection[int], block_size: int) -> BlendJob:
        """The job with its prefix hit cut at the first of its blocks in ``busy``: blocks other
        requests compute in this same step. vLLM caches a block's hash when it allocates it, so
        a request scheduled beside the one that computes a block hits it before its KV exists,
        and this job runs before the forward pass that writes it. The worker computes (and
        writes) the positions from there itself; a block holds the same tokens for both."""
        for index, block in enumerate(self.block_ids[: self.num_local_cached // block_size]):
            if block in busy:
                return replace(self, num_local_cached=index * block_size)
        return self

    def settled(self, attention_reads_cache: bool, recipe: Recipe) -> int:
        """Leading positions vLLM's prefix cache already holds, which a blend by ``recipe`` can
        skip when its attention reads them from the paged cache (question attention needs their
        keys)."""
        if not attention_reads_cache or recipe.metric in QUESTION_METRICS:
            return 0
        return self.num_local_cached

    def right_behind(self, prefix: list[int], start: int, first_reused: int | None) -> bool:
        """Whether a chunk at ``start`` is stored as computed here: it directly follows ``prefix``
        at the prompt's start (computed exactly as alone), or the plan stores chunks behind
        whatever stands before them (contextual precompute, learning) and nothing before it
        was reused (``first_reused``: where the first chunk loaded from the store starts), so
        what it was computed behind is exact."""
        if self.plan.store_behind_context:
            return computed_exactly(start, first_reused)
        return self.behind_fixed_prefix(prefix, start)

    def kept_as_computed(
        self, prefix: list[int], start: int, first_reused: int | None, rotates: bool
    ) -> bool:
        """Whether the blend's own KV of a missed chunk at ``start`` is what gets stored, so
        the chunk is not computed a second time on the request's path. Where the plan stores
        chunks behind their context (learning, contextual precompute), only KV computed
        exactly is. Otherwise any chunk is, where RoPE lets its keys move to the prefix end
        (``rotates``): exact KV for a first sighting or a miss before the first reused chunk,
        and for a miss after it the KV it got over the reused chunks, which the front end
        recomputes behind the fixed prefix once idle (`BlendStats.stored_in_context`)."""
        if self.plan.store_behind_context:
            return computed_exactly(start, first_reused)
        return rotates or self.behind_fixed_prefix(prefix, start)

    def behind_fixed_prefix(self, prefix: list[int], start: int) -> bool:
        """Whether a chunk at ``start`` directly follows ``prefix`` at the prompt's start, where
        it is computed exactly as alone."""
        return start == len(prefix) and self.token_ids[:start] == prefix


def computed_exactly(start: int, first_reused: int | None) -> bool:
    """Whether a blend computes the tokens from ``start`` on exactly as a prefill of its prompt
    would: nothing before them was reused (``first_reused``: where the first chunk loaded
    from the store starts; uncached tokens before it see only other uncached tokens)."""
    return first_reused is None or start < first_reused


@dataclass
class BlendConnectorMetadata(KVConnectorMetadata):
    jobs: list[BlendJob] = field(default_factory=list)
    captures: list[BlendJob] = field(default_factory=list)
    """First sightings vLLM prefilled whose chunks (``claim_end``: the last one's end) this
    step's forward finishes: copied out of the paged cache after it (``wait_for_save``)."""
    evictions: list[Eviction] = field(default_factory=list)
    """Chunks (salt and token ids) whose stored KV must be deleted (documents removed)."""
