"""A check layer's strategies (two-stage question pool, adaptive budget) against plain loops."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import Tensor

from engine.blend.check import CheckLayer, mass_count, rows_to_keep
from engine.blend.select import question_attention
from tests.unit.tiny_llama import blend_at

TOKENS, HEADS, KV_HEADS, DIM = 24, 4, 2, 8
QUESTION_START = 20  # positions 20..23 are the question; the rest cached chunk tokens


def _tensor(seed: int, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _layer(seed: int = 0) -> CheckLayer:
    """A check layer where every position is still active."""
    kv = (TOKENS, KV_HEADS, DIM)
    return CheckLayer(
        queries=_tensor(seed, TOKENS, HEADS, DIM),
        active=torch.arange(TOKENS),
        fresh=(_tensor(seed + 1, *kv), _tensor(seed + 2, *kv)),
        cached=(_tensor(seed + 3, *kv), _tensor(seed + 4, *kv)),
        keys=_tensor(seed + 5, *kv),
        question_rows=TOKENS - QUESTION_START,
        scale=DIM**-0.5,
        sum_heads=lambda partial: partial,
    )


def _is_cached() -> Tensor:
    return torch.arange(TOKENS) < QUESTION_START


def _v_deviation_loop(layer: CheckLayer) -> list[float]:
    (_, fresh_v), (_, cached_v) = layer.fresh, layer.cached
    return [
        sum(float((fresh_v[t, h] - cached_v[t, h]).norm()) for h in range(KV_HEADS))
        for t in range(TOKENS)
    ]


def _top(scores: list[float], among: list[int], count: int) -> list[int]:
    return sorted(among, key=lambda row: scores[row], reverse=True)[:count]


QUESTION = list(range(QUESTION_START, TOKENS))


@pytest.mark.parametrize("mass", [0.1, 0.5, 0.8, 0.95])
def test_mass_count_is_the_fewest_top_scores_reaching_the_mass(mass: float) -> None:
    scores = _tensor(7, 50).abs()
    ordered = sorted(scores.tolist(), reverse=True)
    total, running, expected = sum(ordered), 0.0, 0
    while running < mass * total:
        running += ordered[expected]
        expected += 1
    assert mass_count(scores, mass) == expected


def test_mass_count_edges() -> None:
    assert mass_count(torch.tensor([3.0, 1.0]), 1.0) == 2
    assert mass_count(torch.zeros(5), 0.5) == 0  # nothing deviates: nothing to recompute
    assert mass_count(torch.tensor([0.0, 9.0, 1.0]), 0.9) == 1
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="mass"):
            mass_count(torch.ones(3), bad)


@pytest.mark.parametrize(("pool", "keep"), [(1.0, 4), (2.0, 3), (3.0, 5)])
def test_two_stage_keeps_the_most_deviating_within_the_question_pool(
    pool: float, keep: int
) -> None:
    layer = _layer()
    asking = layer.active >= QUESTION_START
    relevance = question_attention(
        layer.queries[asking], layer.active[asking], layer.keys, layer.scale
    ).tolist()
    pooled = _top(relevance, list(range(QUESTION_START)), math.ceil(pool * keep))
    expected = sorted(_top(_v_deviation_loop(layer), pooled, keep) + QUESTION)
    selection = blend_at(0.2, metric="qv", question_pool=pool)
    assert rows_to_keep(layer, _is_cached(), keep, selection).tolist() == expected


def test_two_stage_with_a_pool_wider_than_the_candidates_is_v_deviation() -> None:
    layer = _layer(seed=3)
    wide = rows_to_keep(layer, _is_cached(), 5, blend_at(0.2, metric="qv", question_pool=4.0))
    assert wide.tolist() == rows_to_keep(layer, _is_cached(), 5, blend_at(0.2)).tolist()


@pytest.mark.parametrize("mass", [0.2, 0.6, 0.9])
def test_adaptive_budget_keeps_the_mass_share_at_most_keep(mass: float) -> None:
    layer = _layer(seed=5)
    deviation = _v_deviation_loop(layer)
    chunk = list(range(QUESTION_START))
    ordered = _top(deviation, chunk, QUESTION_START)
    total, running, count = sum(deviation[row] for row in chunk), 0.0, 0
    while running < mass * total:
        running += deviation[ordered[count]]
        count += 1
    for keep in (3, 12):
        expected = sorted(ordered[: min(keep, count)] + QUESTION)
        got = rows_to_keep(layer, _is_cached(), keep, blend_at(0.2, budget_mass=mass))
        assert got.tolist() == expected


def test_adaptive_budget_recomputes_less_when_the_deviation_is_concentrated() -> None:
    layer = _layer(seed=9)
    values = layer.cached[1].clone()
    values[[2, 11]] += 100.0  # only two tokens' values moved
    concentrated = replace(layer, fresh=(layer.fresh[0], values))
    selection = blend_at(0.2, budget_mass=0.9)
    assert rows_to_keep(concentrated, _is_cached(), 8, selection).tolist() == [2, 11, *QUESTION]
    assert len(rows_to_keep(layer, _is_cached(), 8, selection)) > 2 + len(QUESTION)
