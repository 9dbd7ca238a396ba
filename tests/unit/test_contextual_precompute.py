"""Contextual precompute: the window a chunk is computed behind, the flag that stores it."""

from __future__ import annotations

import pytest

from engine.chunk_cache import context_window
from engine.connector.metadata import BlendJob, computed_exactly
from engine.contract import BlendPlan, ChunkSpan, Recipe

NEUTRAL = [1, 2, 3, 4, 5]


def _reference_window(neutral: list[int], context: list[list[int]]) -> list[int]:
    """The same window built the long way: neutral then context, keep the last len(neutral)."""
    joined = list(neutral)
    for chunk in context:
        joined.extend(chunk)
    return joined[len(joined) - len(neutral) :]


@pytest.mark.parametrize(
    ("context", "window"),
    [
        ([], [1, 2, 3, 4, 5]),
        ([[7, 8], [9]], [4, 5, 7, 8, 9]),
        ([[7, 8, 9, 10, 11]], [7, 8, 9, 10, 11]),
        ([[10, 11, 12], [13, 14, 15]], [11, 12, 13, 14, 15]),
        ([[6], [], [7, 8, 9, 10, 11, 12, 13]], [9, 10, 11, 12, 13]),
    ],
)
def test_the_window_is_the_contexts_tail_filled_with_the_neutral_tail(
    context: list[list[int]], window: list[int]
) -> None:
    assert context_window(NEUTRAL, context) == window
    assert context_window(NEUTRAL, context) == _reference_window(NEUTRAL, context)


def test_without_neutral_passages_the_window_is_empty() -> None:
    assert context_window([], [[1, 2, 3]]) == []


def test_the_store_behind_context_flag_survives_the_trip_and_is_absent_by_default() -> None:
    spans = (ChunkSpan(4, 9),)
    contextual = BlendPlan(Recipe("blend", 1.0), spans, store_behind_context=True)
    assert BlendPlan.from_params(contextual.to_params()) == contextual
    plain = BlendPlan(Recipe("blend", 1.0), spans)
    assert "store_behind_context" not in plain.to_params()["ragblend"]
    assert BlendPlan.from_params(plain.to_params()) == plain


def _job(token_ids: list[int], start: int, behind_context: bool) -> BlendJob:
    span = ChunkSpan(start, start + 2)
    plan = BlendPlan(Recipe("blend", 1.0), (span,), store_behind_context=behind_context)
    return BlendJob("r", plan, token_ids, 0, start + 2, [0])


def test_only_a_flagged_job_stores_a_chunk_behind_other_context() -> None:
    prefix = [1, 2, 3]
    assert _job([1, 2, 3, 8, 9, 0], 3, False).right_behind(prefix, 3, None)
    assert not _job([1, 7, 7, 8, 9, 0], 3, False).right_behind(prefix, 3, None)
    assert not _job([1, 2, 3, 7, 8, 9, 0], 4, False).right_behind(prefix, 4, None)
    assert _job([1, 7, 7, 8, 9, 0], 3, True).right_behind(prefix, 3, None)
    assert _job([1, 7, 7, 7, 8, 9, 0], 4, True).right_behind(prefix, 4, None)
    assert _job([1, 8, 9, 0], 1, True).right_behind(prefix, 1, None)


def test_a_flagged_job_stores_in_place_only_chunks_before_the_first_reused_one() -> None:
    """Behind a reused chunk a miss is computed against blended KV, not what a prefill gives."""
    prefix, job = [1, 2, 3], _job([1, 7, 7, 8, 9, 0], 3, True)
    assert job.right_behind(prefix, 3, first_reused=5)
    assert not job.right_behind(prefix, 3, first_reused=3)
    assert not job.right_behind(prefix, 3, first_reused=1)
    assert _job([1, 2, 3, 8, 9, 0], 3, False).right_behind(prefix, 3, first_reused=1)


def test_a_chunk_is_computed_exactly_when_nothing_before_it_was_reused() -> None:
    assert computed_exactly(40, first_reused=None)  # a first sighting: every chunk
    assert computed_exactly(40, first_reused=90)
    assert not computed_exactly(90, first_reused=90)
    assert not computed_exactly(140, first_reused=90)


def test_a_request_stores_every_miss_as_blended_and_leaves_the_prefix_form_for_later() -> None:
    """A miss behind a reused chunk keeps the KV the blend gave it (settled later, off the
    request's path) wherever its keys can move; a learning plan keeps only exact KV."""
    prefix, request = [1, 2, 3], _job([1, 7, 7, 8, 9, 0], 3, False)
    assert request.kept_as_computed(prefix, 3, first_reused=1, rotates=True)
    assert request.kept_as_computed(prefix, 3, first_reused=None, rotates=True)
    assert not request.kept_as_computed(prefix, 3, first_reused=1, rotates=False)
    assert _job([1, 2, 3, 8, 9, 0], 3, False).kept_as_computed(prefix, 3, None, rotates=False)
    learning = _job([1, 7, 7, 8, 9, 0], 3, True)
    assert learning.kept_as_computed(prefix, 3, first_reused=5, rotates=True)
    assert not learning.kept_as_computed(prefix, 3, first_reused=1, rotates=True)
