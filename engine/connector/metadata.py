"""What crosses between the scheduler and worker halves of the connector (pickled)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from engine.contract import BlendPlan


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


@dataclass
class BlendConnectorMetadata(KVConnectorMetadata):
    jobs: list[BlendJob] = field(default_factory=list)
    evictions: list[list[int]] = field(default_factory=list)
    """Token ids of chunks whose stored KV must be deleted (documents removed)."""
