"""First sightings left to vLLM's prefill: the scheduler asks the worker's store over the lookup
channel, claims nothing when no chunk is stored, and hands the worker a capture job in the step
whose forward computes the last chunk (plain records stand in for vLLM's scheduler output)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from engine.connector.lookup import ChunkLookupClient, ChunkLookupServer
from engine.connector.scheduler import BlendScheduler
from engine.contract import BlendPlan, ChunkSpan, Recipe

BLOCK = 16
PROMPT = list(range(100, 196))  # 96 tokens: a 16-token head, chunks at 16..80, the question
PLAN = BlendPlan(Recipe("blend", 0.15, "probe"), (ChunkSpan(16, 48), ChunkSpan(48, 80)))


class Store:
    """What the worker answers: chunks stored (by their first token), asked how often."""

    def __init__(self, stored: set[int], can_capture: bool = True, delay_s: float = 0) -> None:
        self.stored, self.can_capture, self.delay_s = stored, can_capture, delay_s
        self.questions: list[tuple[str, list[list[int]]]] = []

    def __call__(self, salt: str, chunks: list[list[int]]) -> list[bool]:
        self.questions.append((salt, chunks))
        time.sleep(self.delay_s)
        return [chunk[0] in self.stored for chunk in chunks]


@pytest.fixture
def serve():
    servers: list[ChunkLookupServer] = []

    def start(store: Store) -> BlendScheduler:
        channel = uuid.uuid4().hex
        servers.append(ChunkLookupServer(channel, store, store.can_capture))
        return BlendScheduler(BLOCK, ChunkLookupClient(channel))

    yield start
    for server in servers:
        server.close()


def _request(req_id: str, plan: BlendPlan = PLAN) -> Any:
    return SimpleNamespace(
        request_id=req_id,
        kv_transfer_params=plan.to_params(),
        num_prompt_tokens=len(PROMPT),
        prompt_token_ids=PROMPT,
    )


def _step(new: list[Any], cached: list[tuple[str, list[int] | None, int]], scheduled: dict) -> Any:
    return SimpleNamespace(
        scheduled_new_reqs=new,
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[req_id for req_id, _, _ in cached],
            new_block_ids=[None if blocks is None else (blocks,) for _, blocks, _ in cached],
            num_computed_tokens=[computed for _, _, computed in cached],
            resumed_req_ids=set(),
        ),
        num_scheduled_tokens=scheduled,
    )


def _new(req_id: str, blocks: list[int], computed: int) -> Any:
    return SimpleNamespace(req_id=req_id, block_ids=(blocks,), num_computed_tokens=computed)


def test_a_request_with_no_stored_chunk_is_prefilled_by_vllm_and_captured_after(serve) -> None:
    store = Store(stored=set())
    scheduler = serve(store)
    assert scheduler.num_new_matched_tokens(_request("r"), 16) == 0
    assert scheduler.num_new_matched_tokens(_request("r"), 16) == 0  # asked again while waiting
    assert store.questions == [("", [PROMPT[16:48], PROMPT[48:80]])]  # the first answer stands
    step = _step([_new("r", [1, 2, 3, 4, 5, 6], 16)], [], {"r": 80})
    metadata = scheduler.build_metadata(step)
    assert metadata.jobs == []
    (capture,) = metadata.captures
    assert (capture.block_ids, capture.num_local_cached, capture.claim_end) == (
        [1, 2, 3, 4, 5, 6],
        16,
        80,
    )
    assert capture.token_ids == PROMPT[:80]
    assert scheduler.build_metadata(_step([], [("r", None, 96)], {"r": 1})).captures == []


def test_a_chunked_prefill_is_captured_in_the_step_that_computes_the_last_chunk(serve) -> None:
    scheduler = serve(Store(stored=set()))
    assert scheduler.num_new_matched_tokens(_request("r"), 0) == 0
    first = scheduler.build_metadata(_step([_new("r", [1, 2, 3], 0)], [], {"r": 48}))
    assert first.captures == []  # the second chunk is not computed yet
    second = scheduler.build_metadata(_step([], [("r", [9, 4], 48)], {"r": 40}))
    (capture,) = second.captures
    assert capture.block_ids == [1, 2, 3, 9, 4] and capture.num_local_cached == 0


def test_a_request_with_any_stored_chunk_is_claimed_and_blended(serve) -> None:
    scheduler = serve(Store(stored={PROMPT[48]}))
    assert scheduler.num_new_matched_tokens(_request("r"), 16) == 95 - 16


@pytest.mark.parametrize(
    "store",
    [Store(stored=set(), can_capture=False), Store(stored=set(), delay_s=0.3)],
    ids=["worker-cannot-copy-its-cache", "no-answer-in-time"],
)
def test_without_a_yes_from_the_worker_the_request_is_claimed(serve, store: Store) -> None:
    assert serve(store).num_new_matched_tokens(_request("r"), 16) == 95 - 16


def test_plans_that_compute_chunks_otherwise_are_never_left_to_vllm(serve) -> None:
    store = Store(stored=set())
    scheduler = serve(store)
    refresh = BlendPlan(PLAN.recipe, PLAN.spans, replace_stored=True)
    behind = BlendPlan(PLAN.recipe, PLAN.spans, store_behind_context=True)
    assert scheduler.num_new_matched_tokens(_request("a", refresh), 16) > 0
    assert scheduler.num_new_matched_tokens(_request("b", behind), 16) > 0
    assert store.questions == []


def test_a_finished_request_is_forgotten(serve) -> None:
    scheduler = serve(Store(stored=set()))
    request = _request("r")
    assert scheduler.num_new_matched_tokens(request, 16) == 0
    scheduler.finished(request)
    assert (
        scheduler.build_metadata(_step([_new("r", [1, 2, 3, 4, 5], 16)], [], {"r": 80})).captures
        == []
    )


def test_the_client_asks_again_after_the_worker_comes_back() -> None:
    channel = uuid.uuid4().hex
    client = ChunkLookupClient(channel)
    assert client.stored("", [[1, 2]]) is None  # nobody listening yet
    server = ChunkLookupServer(channel, Store(stored={1}), can_capture=True)
    try:
        assert client.stored("salt", [[1, 2], [3]]) == ([True, False], True)
    finally:
        server.close()
        client.close()
