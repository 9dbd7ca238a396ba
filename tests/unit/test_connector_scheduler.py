"""The connector's scheduler half over a step of vLLM's scheduler output (plain records standing
in for vLLM's ``Request`` and ``SchedulerOutput``, with the fields the connector reads).

Two requests with the same chunks scheduled in one step: vLLM caches a block's hash when it
allocates it, so the second hits the first's blocks before their KV is computed. The second's
job must not treat those blocks as held (its blend would attend to empty slots).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from engine.connector.scheduler import BlendScheduler
from engine.contract import BlendPlan, ChunkSpan, Recipe

BLOCK = 16
PROMPT = list(range(100, 196))  # 96 tokens: a 16-token head, chunks at 16..80, the question
PLAN = BlendPlan(Recipe("blend", 1.0, "v"), (ChunkSpan(16, 48), ChunkSpan(48, 80)))


def _request(req_id: str) -> Any:
    return SimpleNamespace(
        request_id=req_id,
        kv_transfer_params=PLAN.to_params(),
        num_prompt_tokens=len(PROMPT),
        prompt_token_ids=PROMPT,
    )


def _new(req_id: str, blocks: list[int], computed: int) -> Any:
    return SimpleNamespace(req_id=req_id, block_ids=(blocks,), num_computed_tokens=computed)


def _output(new: list[Any], scheduled: dict[str, int]) -> Any:
    cached = SimpleNamespace(req_ids=[], new_block_ids=[], resumed_req_ids=set())
    return SimpleNamespace(
        scheduled_new_reqs=new, scheduled_cached_reqs=cached, num_scheduled_tokens=scheduled
    )


def _claim(scheduler: BlendScheduler, req_id: str, prefix_hit: int) -> int:
    request = _request(req_id)
    claimed = scheduler.num_new_matched_tokens(request, prefix_hit)
    scheduler.after_alloc(request, None, claimed)  # type: ignore[arg-type]
    return claimed


def test_a_prefix_hit_on_blocks_computed_in_the_same_step_is_not_held() -> None:
    scheduler = BlendScheduler(BLOCK)
    assert _claim(scheduler, "first", 16) == 64  # the head was cached before this step
    # The second request, the same chunks, hits the head and the first's blocks up to the last
    # chunk's last block (allocated this step, not yet computed): it claims the rest.
    assert _claim(scheduler, "second", 64) == 16
    output = _output(
        [_new("first", [1, 2, 3, 4, 5, 6], 80), _new("second", [1, 2, 3, 4, 7, 8], 80)],
        {"first": 16, "second": 16},
    )
    jobs = {job.request_id: job for job in scheduler.build_metadata(output).jobs}
    assert jobs["first"].num_local_cached == 16  # block 1 was computed in an earlier step
    assert jobs["second"].num_local_cached == 16  # blocks 2-4 are the first's, in flight
    assert jobs["second"].claim_end == 80


def test_blocks_computed_in_an_earlier_step_stay_held() -> None:
    scheduler = BlendScheduler(BLOCK)
    _claim(scheduler, "late", 48)
    output = _output([_new("late", [1, 2, 3, 8, 9, 10], 80)], {"late": 16})
    (job,) = scheduler.build_metadata(output).jobs
    assert job.num_local_cached == 48 and job.block_ids == [1, 2, 3, 8, 9, 10]


def test_a_request_the_connector_did_not_claim_still_marks_the_blocks_it_computes() -> None:
    scheduler = BlendScheduler(BLOCK)
    _claim(scheduler, "blended", 64)
    # "plain" (no plan) computes blocks 2-6 in this step; "blended" hit 4 of them.
    output = _output(
        [_new("plain", [1, 2, 3, 4, 5, 6], 16), _new("blended", [1, 2, 3, 4, 7, 8], 80)],
        {"plain": 80, "blended": 16},
    )
    (job,) = scheduler.build_metadata(output).jobs
    assert job.num_local_cached == 16
