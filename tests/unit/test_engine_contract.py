"""The gateway-engine contract: plans, statistics and settings survive their trip intact."""

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
    SelectionOverrides,
    parse_check_layers,
    stats_in,
    stats_params,
)


@pytest.mark.parametrize(
    "overrides",
    [
        SelectionOverrides(check_layers=((1, 1.0),), metric="kv", chunk_head_tokens=0),
        SelectionOverrides(metric="qv", question_pool=2.5, budget_mass=0.6),
    ],
)
def test_plan_round_trips_through_request_params(overrides: SelectionOverrides) -> None:
    plan = BlendPlan("blend", 0.1, (ChunkSpan(1, 5), ChunkSpan(5, 9)), overrides)
    assert BlendPlan.from_params(json.loads(json.dumps(plan.to_params()))) == plan


@pytest.mark.parametrize(("pool", "mass"), [(0.5, None), (None, 0.0), (None, 1.2)])
def test_a_pool_narrower_than_the_budget_or_a_mass_outside_0_1_is_refused(
    pool: float | None, mass: float | None
) -> None:
    with pytest.raises(ValueError, match=r"question_pool|budget_mass"):
        SelectionOverrides(question_pool=pool, budget_mass=mass)


def test_plan_without_overrides_keeps_server_settings() -> None:
    plan = BlendPlan("reuse", 0.0, (ChunkSpan(0, 3),))
    params = plan.to_params()
    assert params["ragblend"]["overrides"] == {}
    assert BlendPlan.from_params(params).overrides == SelectionOverrides()


@pytest.mark.parametrize("spans", [((2, 2),), ((0, 4), (3, 6))])
def test_plan_rejects_empty_or_overlapping_spans(spans: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="spans"):
        BlendPlan("blend", 0.15, tuple(ChunkSpan(*span) for span in spans))


@pytest.mark.parametrize("metric", ["attn", "qv"])
def test_attention_selection_claims_the_question_but_not_the_last_token(metric: Metric) -> None:
    spans = (ChunkSpan(1, 5), ChunkSpan(5, 9))
    plain = BlendPlan("blend", 0.15, spans)
    by_attention = BlendPlan("blend", 0.15, spans, SelectionOverrides(metric=metric))
    assert plain.claim_end(num_prompt_tokens=14, default_metric="v") == 9
    assert plain.claim_end(num_prompt_tokens=14, default_metric=metric) == 13
    assert by_attention.claim_end(num_prompt_tokens=14, default_metric="v") == 13
    assert BlendPlan("reuse", 0.0, spans).claim_end(14, metric) == 9
    assert BlendPlan("full", 1.0, spans).claim_end(14, "v") == 0


_Q = {"metric": "q"}


@pytest.mark.parametrize(
    "params",
    [
        {"ragblend": {"mode": "blend"}},
        {"ragblend": {"mode": "blend", "recompute_ratio": 0.3, "spans": [[0]]}},
        {"ragblend": {"mode": "sideways", "recompute_ratio": 0.3, "spans": []}},
        {"ragblend": {"mode": "blend", "recompute_ratio": 2, "spans": []}},
        {"ragblend": {"mode": "blend", "recompute_ratio": 0.3, "spans": [], "overrides": 7}},
        {"ragblend": {"mode": "blend", "recompute_ratio": 0.3, "spans": [], "overrides": _Q}},
        {"ragblend": {"mode": "blend", "recompute_ratio": 0.3, "spans": "ab"}},
    ],
)
def test_a_malformed_plan_is_one_error_type(params: dict) -> None:
    with pytest.raises(ValueError):
        BlendPlan.from_params(params)


def test_a_full_prefill_carries_nothing_to_the_engine() -> None:
    plan = BlendPlan("full", 0.3, (ChunkSpan(1, 5),))
    assert plan.to_params() == {} and plan.extra_args() is None and plan.cache_salt is None
    blended = BlendPlan("blend", 0.3, (ChunkSpan(1, 5),))
    assert blended.extra_args() == {"kv_transfer_params": blended.to_params()}
    assert blended.cache_salt != BlendPlan("reuse", 0.3, (ChunkSpan(1, 5),)).cache_salt


def test_blends_selected_differently_never_share_a_cache_salt() -> None:
    spans = (ChunkSpan(1, 5),)
    salts = {
        BlendPlan("blend", 0.1, spans, SelectionOverrides(metric=metric)).cache_salt
        for metric in ("v", "probe", None)
    }
    assert len(salts) == 3
    same = BlendPlan("blend", 0.1, spans, SelectionOverrides(metric="probe"))
    assert same.cache_salt == BlendPlan.from_params(same.to_params()).cache_salt


def test_statistics_round_trip_and_count_cached_tokens() -> None:
    stats = BlendStats("blend", 90, 30, 3, 1, 12, fell_back=False, rejected_chunks=1)
    assert stats_in(stats_params(stats)) == stats
    assert stats.cached_tokens == 102
    assert stats_in({}) is None
    assert BlendStats.without_blend("full", 100, 40) == BlendStats("full", 0, 60, 0, 0, 40)


def test_statistics_from_a_newer_worker_ignore_unknown_fields() -> None:
    body = {**BlendStats("reuse", 1, 2, 3, 4, 5).to_dict(), "from_the_future": 1}
    assert BlendStats.from_dict(body) == BlendStats("reuse", 1, 2, 3, 4, 5)


@pytest.mark.parametrize("text", ["3:1,1:2", "1:0", "-1:1", "1:2,1:1", "a:b", "1"])
def test_check_layer_schedules_must_ascend_with_positive_multiples(text: str) -> None:
    with pytest.raises(ValueError, match="check layers"):
        parse_check_layers(text)


def test_the_server_defaults_select_by_v_deviation_at_a_fixed_ratio() -> None:
    settings = BlendSettings("m", "/data/chunk_kv", 1 << 20, None, (1,))
    assert (settings.metric, settings.check_layers, settings.chunk_head_tokens) == (
        "v", DEFAULT_CHECK_LAYERS, 8
    )
    assert (settings.question_pool, settings.budget_mass) == (3.0, 1.0)
    assert DEFAULT_RECOMPUTE_RATIO == 0.3


def test_settings_survive_vllm_extra_config() -> None:
    settings = BlendSettings(
        "m", "/data/chunk_kv", 1 << 20, None, (1, 2, 3), DEFAULT_CHECK_LAYERS, "kv", True, 4, "c"
    )
    extra = json.loads(json.dumps(settings.to_extra_config()))
    assert BlendSettings.from_extra_config(extra) == settings
    assert settings.store_dir == "/data/chunk_kv/store"
