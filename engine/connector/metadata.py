"""What crosses between the scheduler and worker halves of the connector (pickled), and what
a job implies: its cache slots, the positions it can skip, how it selects tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import torch
from torch import Tensor
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from engine.blend.fuse import Selection
from engine.contract import QUESTION_METRICS, BlendPlan, BlendSettings

T = TypeVar("T")


@dataclass(frozen=True)
class BlendJob:
    """One newly scheduled request whose first ``claim_end`` prompt tokens the worker fills."""

    request_id: str
    token_ids: list[int]
    block_ids: list[int]
    num_local_cached: int
    """Leading tokens vLLM's own prefix cache already holds; their slots are not rewritten."""
    claim_end: int
    plan: BlendPlan

    def selection(self, ratio: float, settings: BlendSettings) -> Selection:
        """How this job picks the tokens it recomputes: its plan's overrides, else the server's.
        At ratio 0 only chunk heads asked for by the plan are recomputed (``blend@0/heads=N``)."""
        overrides = self.plan.overrides
        heads = _first_set(overrides.chunk_head_tokens, settings.chunk_head_tokens)
        return Selection(
            ratio,
            _first_set(overrides.check_layers, settings.check_layers),
            _first_set(overrides.metric, settings.metric),
            _first_set(overrides.normalize, settings.normalize),
            _first_set(overrides.chunk_head_tokens, 0) if ratio == 0 else heads,
            _first_set(overrides.question_pool, settings.question_pool),
            _first_set(overrides.budget_mass, settings.budget_mass),
        )

    def slots(self, block_size: int, device: torch.device) -> Tensor:
        """Paged-cache slots of the positions this job writes: num_local_cached..claim_end."""
        positions = torch.arange(self.num_local_cached, self.claim_end)
        blocks = torch.tensor(self.block_ids)[positions // block_size]
        return (blocks * block_size + positions % block_size).to(device)

    def settled(self, attention_reads_cache: bool, metric: str) -> int:
        """Leading positions vLLM's prefix cache already holds, which the blend can skip when its
        attention reads them from the paged cache (question attention needs their keys)."""
        if not attention_reads_cache or metric in QUESTION_METRICS:
            return 0
        return self.num_local_cached

    def right_behind(self, prefix: list[int], start: int) -> bool:
        """Whether a chunk at ``start`` is stored as computed here: it directly follows ``prefix``
        at the prompt's start (computed exactly as alone), or the plan stores it behind whatever
        context of the prefix's length stands there (contextual precompute)."""
        if start != len(prefix):
            return False
        return self.plan.store_behind_context or self.token_ids[:start] == prefix


@dataclass
class BlendConnectorMetadata(KVConnectorMetadata):
    jobs: list[BlendJob] = field(default_factory=list)
    evictions: list[list[int]] = field(default_factory=list)
    """Token ids of chunks whose stored KV must be deleted (documents removed)."""


def _first_set(override: T | None, default: T) -> T:
    return default if override is None else override
