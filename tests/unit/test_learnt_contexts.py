"""Contexts learnt from traffic: counting arrangements, the bounded job queue, the per-chunk
records of what stored KV was computed behind, and the recipe a request takes from them."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from engine.contract import ChunkSpan
from gateway.http.metrics import LEARNT_CONTEXT_WORK
from gateway.openai.protocol import BlendOptions
from gateway.rag.blending import blend_plan, blend_summary
from gateway.rag.chunked_prompt import ChunkedPrompt, Chunks
from gateway.rag.learnt_contexts import LearntContexts
from gateway.rag.learnt_tracker import Arrangement, ContextRecords, LearningQueue
from gateway.settings import Settings

A, B, C, D = [1, 2, 3], [4, 5], [6, 7, 8, 9], [10]
SEP = (13, 13)


def arrangement(*chunks: list[int], separator: tuple[int, ...] = SEP) -> Arrangement:
    return Arrangement.of(list(chunks), separator)


def test_a_chunk_stands_in_the_context_of_the_chunks_before_it_in_order() -> None:
    abc, bac, abd = arrangement(A, B, C), arrangement(B, A, C), arrangement(A, B, D)
    assert abc.contexts[0] == bac.contexts[0]  # the first chunk: nothing before it
    assert abc.contexts[1] != bac.contexts[1] and abc.contexts[2] != bac.contexts[2]
    assert abc.contexts[:3] == abd.contexts[:3] and abc.digests[:2] == abd.digests[:2]
    assert len({abc.key, bac.key, abd.key}) == 3
    assert arrangement(A, B, separator=()).contexts[1] != arrangement(A, B).contexts[1]


def test_the_head_is_carried_but_not_part_of_the_identity() -> None:
    turn1 = Arrangement.of([A, B], SEP, head=[7, 7])
    turn2 = Arrangement.of([A, B], SEP, head=[7, 7, 8, 8])
    assert turn1.key == turn2.key and turn1.contexts == turn2.contexts
    assert turn1.head == (7, 7) and turn2.head == (7, 7, 8, 8)


def test_an_arrangement_is_queued_once_after_enough_sightings() -> None:
    queue = LearningQueue(after=3, capacity=8, queue_size=4)
    abc = arrangement(A, B, C)
    assert [queue.observe(abc) for _ in range(4)] == ["counted", "counted", "queued", "pending"]
    assert queue.observe(arrangement(C, B, A)) == "counted"  # another order counts apart
    assert queue.take() == abc and queue.take() is None
    assert queue.observe(abc) == "pending"  # still being learnt
    queue.finish(abc)
    assert queue.observe(abc) == "counted"  # counted afresh once learnt


def test_the_least_recently_seen_arrangement_is_forgotten_at_capacity() -> None:
    queue = LearningQueue(after=2, capacity=2, queue_size=4)
    ab, bc, cd = arrangement(A, B), arrangement(B, C), arrangement(C, D)
    queue.observe(ab), queue.observe(bc), queue.observe(cd)
    assert queue.tracked == 2
    assert queue.observe(ab) == "counted"  # ab was the oldest: forgotten, counted from one
    assert queue.observe(cd) == "queued"  # bc left in its place
    assert queue.observe(bc) == "counted"


def test_a_full_queue_drops_the_job_and_its_count_starts_again() -> None:
    queue = LearningQueue(after=1, capacity=8, queue_size=1)
    assert queue.observe(arrangement(A, B)) == "queued"
    assert queue.observe(arrangement(B, C)) == "dropped"
    assert queue.queued == 1
    queue.take()
    assert queue.observe(arrangement(B, C)) == "queued"


@pytest.mark.parametrize("bad", [{"after": 0}, {"capacity": 0}, {"queue_size": 0}])
def test_bounds_must_be_positive(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LearningQueue(**{"after": 1, "capacity": 1, "queue_size": 1, **bad})


def test_records_say_whether_every_chunk_stands_where_its_kv_was_computed() -> None:
    records = ContextRecords(capacity=8)
    abc = arrangement(A, B, C)
    for position, key in enumerate(("ka", "kb", "kc")):
        records.record(abc.digests[position], abc.contexts[position], key)
    assert records.all_stand_in(abc) and abc.digests[2] in records
    assert not records.all_stand_in(arrangement(B, A, C))
    assert not records.all_stand_in(arrangement(A, B, C, D))  # D was never learnt
    assert records.all_stand_in(arrangement(A, B))  # a prefix of a learnt arrangement
    cb = arrangement(C, B)
    records.record(cb.digests[1], cb.contexts[1], "kb")  # B learnt behind C since
    assert not records.all_stand_in(abc) and records.stands_in(cb.digests[1], cb.contexts[1])


def test_an_evicted_entry_loses_its_context_and_capacity_bounds_the_records() -> None:
    records = ContextRecords(capacity=2)
    ab = arrangement(A, B)
    records.record(ab.digests[0], ab.contexts[0], "ka")
    records.record(ab.digests[1], ab.contexts[1], "kb")
    records.forget_keys(["kb", "unknown"])
    assert not records.all_stand_in(ab) and len(records) == 1
    abc = arrangement(A, B, C)
    records.record(abc.digests[1], abc.contexts[1], "kb")
    records.record(abc.digests[2], abc.contexts[2], "kc")
    assert len(records) == 2 and not records.stands_in(abc.digests[0], abc.contexts[0])


def _counted(outcome: str) -> float:
    return LEARNT_CONTEXT_WORK.labels(outcome)._value.get()


def test_cold_chunks_are_counted_and_learnt_ones_take_the_in_context_recipe() -> None:
    async def scenario() -> None:
        learnt = LearntContexts(None, lambda: False, after=2, capacity=8, queue_size=1)  # type: ignore[arg-type]
        sent = Chunks([A, B, C])
        queued_before = _counted("queued")
        assert learnt.classify(sent, head=[7]).context == "cold"
        assert learnt.classify(sent, head=[7, 8]).context == "cold"
        assert _counted("queued") == queued_before + 1
        job = learnt.queue.take()
        assert job is not None and list(job.chunks) == [tuple(A), tuple(B), tuple(C)]
        assert job.head == (7, 8)  # learnt behind the head of the sighting that queued it
        for position in range(3):
            learnt.records.record(job.digests[position], job.contexts[position], f"k{position}")
        assert learnt.classify(sent).context == "learnt"
        assert learnt.classify(Chunks([A, C, B])).context == "cold"
        for position in range(3):  # learnt behind the head of the sighting that queued them
            digests = job.digests[position], job.contexts[position]
            learnt.records.record(*digests, f"k{position}", job.head_digest)
        assert learnt.classify(sent, head=[7, 8]).context == "exact"
        assert learnt.classify(sent, head=[7]).context == "learnt"
        assert learnt.classify(sent, salt="another project").context == "cold"
        learnt.forget(["k1"])
        assert learnt.classify(sent).context == "cold"

    asyncio.run(scenario())


def test_library_chunks_and_single_chunks_are_not_counted() -> None:
    async def scenario() -> None:
        learnt = LearntContexts(None, lambda: False, after=1, capacity=8, queue_size=4)  # type: ignore[arg-type]
        assert learnt.classify(Chunks([A, B], SEP, context="library")).context == "library"
        assert learnt.classify(Chunks([A])).context == "cold"
        assert learnt.queue.queued == 0 and learnt.queue.tracked == 0

    asyncio.run(scenario())


def test_the_recipe_and_summary_follow_the_chunks_context() -> None:
    settings = Settings(model="m", blend_in_context_metric="probe", blend_metric="v")
    prompt = ChunkedPrompt(list(range(40)), (ChunkSpan(2, 20), ChunkSpan(20, 38)))
    recipes = {
        context: blend_plan(prompt, None, settings, blending=True, context=context).recipe
        for context in ("cold", "library", "learnt", "exact")
    }
    assert recipes["learnt"] == recipes["library"] != recipes["cold"]
    assert recipes["learnt"].recompute_ratio == settings.blend_in_context_ratio
    assert (recipes["exact"].mode, recipes["exact"].ratio) == ("reuse", 0.0)
    chosen = blend_plan(prompt, BlendOptions(metric="v"), settings, True, "exact").recipe
    assert chosen == recipes["learnt"].choose(metric="v")
    assert blend_plan(prompt, None, settings, blending=False, context="exact").recipe.mode == "full"
    plan = blend_plan(prompt, None, settings, blending=True, context="learnt")
    assert blend_summary(plan, None, 40, 0, "learnt")["context"] == "learnt"


def test_learning_takes_any_chunk_prefix() -> None:
    assert Settings(model="m", learn_contexts=True, chunk_prefix="chat").learn_contexts
    with pytest.raises(ValidationError, match="learn_contexts_after"):
        Settings(model="m", learn_contexts_after=0)
