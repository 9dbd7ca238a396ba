"""A first sighting's chunks: stored as computed in their own context, then settled behind the
fixed prefix in the background (`gateway/rag/settle.py`); what the worker tells the front end."""

from __future__ import annotations

from engine.connector.metadata import BlendJob
from engine.connector.placement import Capture, Placement
from engine.contract import BlendPlan, BlendStats, ChunkSpan, Recipe
from engine.kvstore.keys import ChunkKey
from gateway.rag.settle import PrefixSettler

PREFIX = [1, 2, 3]


def _placement(token_ids: list[int], spans: list[tuple[int, int]]) -> tuple[BlendJob, Placement]:
    plan = BlendPlan(Recipe("blend", 0.5), tuple(ChunkSpan(a, b) for a, b in spans))
    job = BlendJob("r", plan, token_ids, 0, spans[-1][1], [0])
    placement = Placement()
    for start, end in spans:
        key = ChunkKey.for_chunk("model", token_ids[start:end])
        placement.keys.append(key)
        placement.captures.append(Capture(key, start, end, token_ids[start:end]))
    return job, placement


def test_only_chunks_computed_in_place_behind_other_context_are_named() -> None:
    job, placement = _placement([1, 2, 3, 7, 7, 8, 8, 9, 9], [(3, 5), (5, 7), (7, 9)])
    assert placement.stored_in_context(job, PREFIX) == ()  # none computed in place
    for capture in placement.captures:
        capture.in_context = True
    assert placement.stored_in_context(job, PREFIX) == (1, 2)  # the first follows the prefix


def test_a_head_other_than_the_prefix_names_every_chunk_computed_in_place() -> None:
    job, placement = _placement([1, 5, 3, 7, 7, 8, 8], [(3, 5), (5, 7)])
    placement.captures[1].in_context = True
    assert placement.stored_in_context(job, PREFIX) == (1,)


def test_the_positions_travel_to_the_front_end_but_not_to_the_client() -> None:
    stats = BlendStats(
        "blend", 0, 40, 0, 3, 0, chunk_keys=("a", "b", "c"), stored_in_context=(0, 2)
    )
    decoded = BlendStats.from_dict(stats.to_dict())
    assert decoded == stats
    assert decoded.stored_in_context == (0, 2)
    assert "stored_in_context" not in stats.summary()


def _stats(*positions: int, fell_back: bool = False) -> BlendStats:
    return BlendStats("blend", 0, 9, 0, 3, 0, fell_back=fell_back, stored_in_context=positions)


async def test_the_settler_queues_each_named_chunk_once_and_drops_beyond_its_capacity() -> None:
    settler = PrefixSettler(None, lambda: False, capacity=3)  # type: ignore[arg-type]
    chunks = [[10, 11], [12, 13], [14, 15]]
    settler.after_blend(chunks, "", _stats(0, 2))
    assert settler.waiting == 2
    settler.after_blend(chunks, "", _stats(0, 2))  # the same chunks again: queued already
    assert settler.waiting == 2
    settler.after_blend(chunks, "alpha", _stats(0))  # another project's entry is its own
    assert settler.waiting == 3
    settler.after_blend(chunks, "", _stats(1))  # full: dropped
    assert settler.waiting == 3


async def test_nothing_is_settled_without_statistics_or_after_a_fallback() -> None:
    settler = PrefixSettler(None, lambda: False, capacity=8)  # type: ignore[arg-type]
    settler.after_blend([[1], [2]], "", None)
    settler.after_blend([[1], [2]], "", _stats(0, 1, fell_back=True))
    settler.after_blend([[1], [2]], "", _stats(5))  # a position past the request's chunks
    assert settler.waiting == 0
