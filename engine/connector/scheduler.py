"""Scheduler half: claim each blended request's chunk region as externally computed."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.connector.first_sight import FirstSightings
from engine.connector.lookup import ChunkLookupClient
from engine.connector.metadata import BlendConnectorMetadata, BlendJob
from engine.contract import BlendPlan, Eviction, evictions_in

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

log = logging.getLogger(__name__)


class BlendScheduler:
    """Runs in the engine core's scheduler thread; never raises on a request's contents."""

    def __init__(self, block_size: int, lookup: ChunkLookupClient | None = None) -> None:
        """``lookup``: the worker's chunk store, asked whether a request is a first sighting
        (left to vLLM's prefill, :mod:`engine.connector.first_sight`); None claims every plan."""
        self._block_size = block_size
        self._first_sightings = FirstSightings(lookup)
        self._claims: dict[str, BlendJob] = {}
        """Claimed requests, as jobs still without their blocks."""
        self._ready: set[str] = set()
        self._evictions: list[Eviction] = []

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
        if not plan.claims(request.num_prompt_tokens, num_computed_tokens):
            return 0
        prompt = list(request.prompt_token_ids or [])
        if self._first_sightings.leave_to_vllm(request.request_id, plan, prompt):
            return 0
        claim_end = plan.claim_end(request.num_prompt_tokens)
        token_ids = prompt[:claim_end]
        job = BlendJob(request.request_id, plan, token_ids, num_computed_tokens, claim_end)
        self._claims[request.request_id] = job
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
        metadata = BlendConnectorMetadata(evictions=self._evictions)
        metadata.captures = self._first_sightings.computed(scheduler_output)
        self._evictions = []
        jobs = {
            req_id: replace(self._claims.pop(req_id), block_ids=list(block_ids[req_id]))
            for req_id in self._ready & block_ids.keys()
        }
        self._ready -= block_ids.keys()
        computing = self._computing(scheduler_output, jobs)
        for req_id, job in jobs.items():
            busy = set().union(*(blocks for other, blocks in computing.items() if other != req_id))
            metadata.jobs.append(job.behind_ready_blocks(busy, self._block_size))
        return metadata

    def _computing(
        self, scheduler_output: SchedulerOutput, jobs: dict[str, BlendJob]
    ) -> dict[str, set[int]]:
        """The blocks each newly scheduled request computes in this step: from its prefix hit
        (a job's own, its claimed region included) to what this step schedules."""
        size, computing = self._block_size, {}
        for new in scheduler_output.scheduled_new_reqs:
            end = new.num_computed_tokens + scheduler_output.num_scheduled_tokens.get(new.req_id, 0)
            job = jobs.get(new.req_id)
            start = new.num_computed_tokens if job is None else job.num_local_cached
            if job is not None:  # its claimed region is written this step, whatever vLLM counts
                end = max(end, job.claim_end)
            computing[new.req_id] = set(new.block_ids[0][start // size : -(-end // size)])
        return computing

    def finished(self, request: Request) -> None:
        self._claims.pop(request.request_id, None)
        self._first_sightings.forget(request.request_id)
        self._ready.discard(request.request_id)
