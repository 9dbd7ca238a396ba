"""What a job may skip: positions vLLM's prefix cache holds, unless the recipe asks the question."""

from __future__ import annotations

import pytest

from engine.connector.metadata import BlendJob
from engine.contract import BlendPlan, ChunkSpan, Metric, Recipe

SPANS = (ChunkSpan(1, 20), ChunkSpan(20, 40))


@pytest.mark.parametrize(("metric", "settled"), [("v", 10), ("attn", 0), ("qv", 0), ("probe", 0)])
def test_question_attention_reads_every_key_so_none_is_settled(
    metric: Metric, settled: int
) -> None:
    recipe = Recipe("blend", 0.3, metric)
    job = BlendJob("r", BlendPlan(recipe, SPANS), list(range(45)), 10, 44, [0])
    assert job.settled(attention_reads_cache=True, recipe=recipe) == settled
    assert job.settled(attention_reads_cache=False, recipe=recipe) == 0
    assert job.settled(attention_reads_cache=True, recipe=Recipe.exact()) == 10
