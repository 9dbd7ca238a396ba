"""Scheduler half of a first sighting: leave the prefill to vLLM, copy the chunks out after.

A request none of whose chunks is stored gains nothing from the blend: every token must be
computed anyway, and vLLM's own forward computes them fastest. So the scheduler claims nothing
for it, follows its prefill (one step, or several under chunked prefill, its blocks growing
with each), and in the step whose forward computes the end of its last chunk hands the worker a
capture job: the request's blocks and chunk spans, to be copied out of the paged cache once
that forward has run (:mod:`engine.connector.capture`). What vLLM computed is what a prefill of
the prompt gives each chunk: exact, in its real context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.connector.lookup import ChunkLookupClient
from engine.connector.metadata import BlendJob
from engine.contract import BlendPlan

if TYPE_CHECKING:
    from vllm.v1.core.sched.output import SchedulerOutput


class FirstSightings:
    """Requests left to vLLM's prefill whose chunks are copied out once computed."""

    def __init__(self, lookup: ChunkLookupClient | None) -> None:
        """``lookup``: the worker's chunk store; None leaves nothing to vLLM."""
        self._lookup = lookup
        self._following: dict[str, BlendJob] = {}
        """Capture jobs by request, their blocks as scheduled so far."""

    def leave_to_vllm(self, request_id: str, plan: BlendPlan, token_ids: Sequence[int]) -> bool:
        """Whether the request is a first sighting vLLM prefills (asked again while it waits:
        the first answer stands). Asks the worker's store; no answer in time means no."""
        if request_id in self._following:
            return True
        if self._lookup is None or not plan.capturable:
            return False
        chunks = [token_ids[span.start : span.end] for span in plan.spans]
        answer = self._lookup.stored(plan.kv_salt, chunks)
        if answer is None:
            return False
        stored, worker_captures = answer
        if not worker_captures or any(stored):
            return False
        end = plan.spans[-1].end
        self._following[request_id] = BlendJob(request_id, plan, list(token_ids[:end]), 0, end)
        return True

    def computed(self, scheduler_output: SchedulerOutput) -> list[BlendJob]:
        """The capture jobs whose chunks this step's forward finishes computing, with the
        request's blocks and the prefix hit it was first scheduled with."""
        if not self._following:
            return []
        done = []
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            job = self._following.get(new.req_id)
            if job is None:
                continue
            blocks, hit = list(new.block_ids[0]), new.num_computed_tokens
            job = replace(job, block_ids=blocks, num_local_cached=hit)
            done += self._advance(job, hit + scheduled.get(new.req_id, 0))
        cached = scheduler_output.scheduled_cached_reqs
        for index, req_id in enumerate(cached.req_ids):
            job = self._following.get(req_id)
            if job is None:
                continue
            new_blocks = cached.new_block_ids[index]
            if new_blocks is not None:
                resumed = req_id in cached.resumed_req_ids
                blocks = list(new_blocks[0]) if resumed else job.block_ids + list(new_blocks[0])
                job = replace(job, block_ids=blocks)
            done += self._advance(job, cached.num_computed_tokens[index] + scheduled.get(req_id, 0))
        return done

    def _advance(self, job: BlendJob, computed_after_step: int) -> list[BlendJob]:
        if computed_after_step >= job.claim_end:
            del self._following[job.request_id]
            return [job]
        self._following[job.request_id] = job
        return []

    def forget(self, request_id: str) -> None:
        """The request finished or was aborted (its chunks, if not yet computed, are not)."""
        self._following.pop(request_id, None)
