"""Scheduler half: claim each blended request's chunk region as externally computed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.connector.metadata import BlendConnectorMetadata, BlendJob
from engine.connector.stats import StatsInbox
from engine.contract import BlendPlan, Metric, evictions_in, stats_params

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

log = logging.getLogger(__name__)


@dataclass
class _Claim:
    plan: BlendPlan
    token_ids: list[int]
    num_local_cached: int
    claim_end: int


class BlendScheduler:
    """Runs in the engine core's scheduler thread; never raises on a request's contents."""

    def __init__(self, inbox: StatsInbox, default_metric: Metric) -> None:
        self._default_metric = default_metric
        self._claims: dict[str, _Claim] = {}
        self._ready: set[str] = set()
        self._evictions: list[list[int]] = []
        self._inbox = inbox

    def note_new_request(self, request: Request) -> None:
        try:
            self._evictions += evictions_in(request.kv_transfer_params)
        except (TypeError, ValueError) as exc:
            log.warning("request %s: ignoring a malformed eviction: %s", request.request_id, exc)

    def num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> int:
        """Tokens past vLLM's own prefix hit that the worker will fill by blending."""
        try:
            plan = BlendPlan.from_params(request.kv_transfer_params)
        except ValueError as exc:
            log.warning("request %s: ignoring a malformed blend plan: %s", request.request_id, exc)
            return 0
        if plan is None:
            return 0
        claim_end = plan.claim_end(request.num_prompt_tokens, self._default_metric)
        if claim_end <= num_computed_tokens:
            return 0
        token_ids = list(request.prompt_token_ids or [])[:claim_end]
        self._claims[request.request_id] = _Claim(plan, token_ids, num_computed_tokens, claim_end)
        return claim_end - num_computed_tokens

    def after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external: int) -> None:
        if num_external > 0 and request.request_id in self._claims:
            self._ready.add(request.request_id)
        else:
            self._claims.pop(request.request_id, None)

    def build_metadata(self, scheduler_output: SchedulerOutput) -> BlendConnectorMetadata:
        """Jobs for claimed requests scheduled this step, new or resumed after preemption."""
        block_ids = {new.req_id: new.block_ids[0] for new in scheduler_output.scheduled_new_reqs}
        cached = scheduler_output.scheduled_cached_reqs
        for index, req_id in enumerate(cached.req_ids):
            new_blocks = cached.new_block_ids[index]
            if req_id in cached.resumed_req_ids and new_blocks is not None:
                block_ids[req_id] = new_blocks[0]
        self._inbox.drain()
        metadata = BlendConnectorMetadata(evictions=self._evictions)
        self._evictions = []
        for req_id in self._ready & block_ids.keys():
            claim = self._claims.pop(req_id)
            metadata.jobs.append(
                BlendJob(
                    request_id=req_id,
                    token_ids=claim.token_ids,
                    block_ids=list(block_ids[req_id]),
                    num_local_cached=claim.num_local_cached,
                    claim_end=claim.claim_end,
                    plan=claim.plan,
                )
            )
        self._ready -= block_ids.keys()
        return metadata

    def close(self) -> None:
        self._inbox.close()

    def finished(self, request: Request) -> dict[str, Any] | None:
        self._claims.pop(request.request_id, None)
        self._ready.discard(request.request_id)
        stats = self._inbox.collect(request.request_id)
        return None if stats is None else stats_params(stats)
