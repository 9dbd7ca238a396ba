"""The gateway-engine contract: recipes, plans, statistics and settings survive their trip."""

from __future__ import annotations

import json

import pytest

from engine.contract import (
    DEFAULT_CHECK_LAYERS,
    DEFAULT_RECOMPUTE_RATIO,
    BlendPlan,
    BlendSettings,
    BlendStats,
    ChunkSpan,
    Metric,
    Recipe,
    parse_check_layers,
)

SPANS = (ChunkSpan(1, 5), ChunkSpan(5, 9))


@pytest.mark.parametrize(
    "recipe",
    [
        Recipe("blend", 0.1, "kv", ((1, 1.0),), chunk_head_tokens=0, normalize=True),
        Recipe("blend", 0.1, "qv", question_pool=2.5, budget_mass=0.6),
        Recipe("reuse", 0.0, chunk_head_tokens=0),
    ],
)
def test_plan_round_trips_through_request_params(recipe: Recipe) -> None:
    plan = BlendPlan(recipe, SPANS, store_behind_context=True, stats_id="cmpl-1-0")
    assert BlendPlan.from_params(json.loads(json.dumps(plan.to_params()))) == plan


@pytest.mark.parametrize(
    "choices",
    [
        {"question_pool": 0.5},
        {"budget_mass": 0.0},
        {"budget_mass": 1.2},
        {"mode": "sideways"},
        {"recompute_ratio": 1.5},
        {"metric": "q"},
        {"chunk_head_tokens": -1},
        {"check_layers": ((2, 1.0), (1, 1.0))},
    ],
)
def test_a_recipe_outside_its_bounds_is_refused(choices: dict) -> None:
    with pytest.raises(ValueError):
        Recipe(**choices)


def test_choices_go_over_a_recipe_and_a_recipe_recomputing_nothing_drops_its_heads() -> None:
    server = Recipe("blend", 0.15, "probe", chunk_head_tokens=8)
    assert server.choose() == server
    assert server.choose(recompute_ratio=None, metric="v") == Recipe("blend", 0.15, "v")
    assert server.choose(mode="reuse").chunk_head_tokens == 0
    assert server.choose(recompute_ratio=0.0).chunk_head_tokens == 0
    assert server.choose(recompute_ratio=0.0, chunk_head_tokens=16).chunk_head_tokens == 16
    assert Recipe("reuse").choose(mode="blend").chunk_head_tokens == 8


@pytest.mark.parametrize("spans", [((2, 2),), ((0, 4), (3, 6))])
def test_plan_rejects_empty_or_overlapping_spans(spans: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="spans"):
        BlendPlan(Recipe(), tuple(ChunkSpan(*span) for span in spans))


@pytest.mark.parametrize("metric", ["attn", "qv", "probe"])
def test_attention_selection_claims_the_question_but_not_the_last_token(metric: Metric) -> None:
    assert BlendPlan(Recipe("blend", 0.15, "v"), SPANS).claim_end(num_prompt_tokens=14) == 9
    assert BlendPlan(Recipe("blend", 0.15, metric), SPANS).claim_end(num_prompt_tokens=14) == 13
    assert BlendPlan(Recipe("reuse", 0.0, metric), SPANS).claim_end(14) == 9
    assert BlendPlan(Recipe("full", 1.0, metric), SPANS).claim_end(14) == 0


def test_a_blend_is_left_to_vllm_when_its_prefix_cache_lacks_less_than_the_blend_recomputes() -> (
    None
):
    long = (ChunkSpan(10, 900), ChunkSpan(900, 1000))
    probe = BlendPlan(Recipe("blend", 0.15, "probe"), long)
    assert probe.claims(1100, num_cached=0)
    assert probe.claims(1100, num_cached=896)  # 203 lacking of 1099: more than 15%
    assert not probe.claims(1100, num_cached=1024)  # a next turn: 75 lacking
    assert not probe.claims(1100, num_cached=1099)
    assert BlendPlan(Recipe("blend", 1.0, "probe"), long).claims(1100, num_cached=1024)
    by_deviation = BlendPlan(Recipe("blend", 0.15, "v"), long)  # reads only what is lacking
    assert by_deviation.claims(1100, num_cached=960)
    assert not by_deviation.claims(1100, num_cached=1000)


_RECIPE = Recipe().to_params()


@pytest.mark.parametrize(
    "params",
    [
        {"ragblend": {"recipe": _RECIPE}},
        {"ragblend": {"recipe": _RECIPE, "spans": [[0]]}},
        {"ragblend": {"recipe": {**_RECIPE, "mode": "sideways"}, "spans": []}},
        {"ragblend": {"recipe": {**_RECIPE, "recompute_ratio": 2}, "spans": []}},
        {"ragblend": {"recipe": 7, "spans": []}},
        {"ragblend": {"recipe": {**_RECIPE, "metric": "q"}, "spans": []}},
        {"ragblend": {"recipe": {"mode": "blend"}, "spans": []}},
        {"ragblend": {"recipe": _RECIPE, "spans": "ab"}},
    ],
)
def test_a_malformed_plan_is_one_error_type(params: dict) -> None:
    with pytest.raises(ValueError):
        BlendPlan.from_params(params)


def test_a_full_prefill_carries_nothing_to_the_engine() -> None:
    plan = BlendPlan(Recipe("full", 1.0), (ChunkSpan(1, 5),))
    assert plan.to_params() == {} and plan.cache_salt is None
    blended = BlendPlan(Recipe("blend", 0.3), (ChunkSpan(1, 5),))
    assert blended.cache_salt != BlendPlan(Recipe("reuse", 0.3), (ChunkSpan(1, 5),)).cache_salt


def test_blends_by_different_recipes_never_share_a_cache_salt() -> None:
    spans = (ChunkSpan(1, 5),)
    recipes = [Recipe(metric=metric) for metric in ("v", "probe")] + [
        Recipe(chunk_head_tokens=0),
        Recipe(budget_mass=0.5),
    ]
    salts = {BlendPlan(recipe, spans).cache_salt for recipe in recipes}
    assert len(salts) == len(recipes)
    same = BlendPlan(Recipe(metric="probe"), spans)
    assert same.cache_salt == BlendPlan.from_params(same.to_params()).cache_salt


def test_statistics_round_trip_and_count_cached_tokens() -> None:
    stats = BlendStats("blend", 90, 30, 3, 1, 12, fell_back=False, rejected_chunks=1)
    assert BlendStats.from_dict(json.loads(json.dumps(stats.to_dict()))) == stats
    assert stats.cached_tokens == 102
    assert BlendStats.without_blend("full", 100, 40) == BlendStats("full", 0, 60, 0, 0, 40)


def test_statistics_from_a_newer_worker_ignore_unknown_fields() -> None:
    body = {**BlendStats("reuse", 1, 2, 3, 4, 5).to_dict(), "from_the_future": 1}
    assert BlendStats.from_dict(body) == BlendStats("reuse", 1, 2, 3, 4, 5)


@pytest.mark.parametrize("text", ["3:1,1:2", "1:0", "-1:1", "1:2,1:1", "a:b", "1"])
def test_check_layer_schedules_must_ascend_with_positive_multiples(text: str) -> None:
    with pytest.raises(ValueError, match="check layers"):
        parse_check_layers(text)


def test_the_default_recipe_selects_by_v_deviation_at_a_fixed_ratio() -> None:
    recipe = Recipe()
    assert (recipe.mode, recipe.metric, recipe.check_layers, recipe.chunk_head_tokens) == (
        "blend",
        "v",
        DEFAULT_CHECK_LAYERS,
        8,
    )
    assert (recipe.question_pool, recipe.budget_mass) == (3.0, 1.0)
    assert recipe.recompute_ratio == DEFAULT_RECOMPUTE_RATIO == 0.3


def test_settings_survive_vllm_extra_config() -> None:
    settings = BlendSettings("m", "/data/chunk_kv", 1 << 20, None, (1, 2, 3), "c")
    extra = json.loads(json.dumps(settings.to_extra_config()))
    assert BlendSettings.from_extra_config(extra) == settings
    assert settings.store_dir == "/data/chunk_kv/store"
