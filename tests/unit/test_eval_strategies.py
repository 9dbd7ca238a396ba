from __future__ import annotations

import pytest

from engine.contract import Recipe
from load_tests.eval.strategies import parse_mode_spec

BASE = Recipe("blend", 0.3, "v", chunk_head_tokens=8)


def test_plain_modes_keep_the_runs_recipe() -> None:
    assert parse_mode_spec("full").recipe(BASE).ratio == 1.0
    assert parse_mode_spec("reuse").recipe(BASE) == Recipe("reuse", 0.0, "v", chunk_head_tokens=0)
    spec = parse_mode_spec("blend@0.15")
    assert (spec.mode, spec.ratio, spec.choices) == ("blend", 0.15, {})
    assert spec.recipe(BASE) == Recipe("blend", 0.15, "v", chunk_head_tokens=8)


def test_blend_options_become_choices_over_the_recipe() -> None:
    spec = parse_mode_spec("blend@0.1/check=1:2,3:1/heads=0/metric=kv/norm=1")
    assert spec.name == "blend@0.1/check=1:2,3:1/heads=0/metric=kv/norm=1"
    assert spec.recipe(BASE) == Recipe(
        "blend", 0.1, "kv", ((1, 2.0), (3, 1.0)), chunk_head_tokens=0, normalize=True
    )


def test_two_stage_adaptive_and_heads_only_specs() -> None:
    two_stage = parse_mode_spec("blend@0.1/metric=qv/pool=3").recipe(BASE)
    assert (two_stage.metric, two_stage.question_pool) == ("qv", 3.0)
    adaptive = parse_mode_spec("blend@0.2/mass=0.5").recipe(BASE)
    assert (adaptive.ratio, adaptive.budget_mass) == (0.2, 0.5)
    heads_only = parse_mode_spec("blend@0/heads=16").recipe(BASE)
    assert (heads_only.ratio, heads_only.chunk_head_tokens) == (0.0, 16)
    assert parse_mode_spec("blend@0").recipe(BASE).chunk_head_tokens == 0


@pytest.mark.parametrize(
    "name",
    [
        "blend",
        "prefix",
        "blend@0.1/metric=q",
        "blend@0.1/window=3",
        "reuse/heads=4",
        "blend@0.2/mass=0",
        "blend@0.1/metric=qv/pool=0.5",
    ],
)
def test_bad_specs_are_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        parse_mode_spec(name)


def _row(mode: str, gap: float, speedup: float) -> dict[str, object]:
    return {"mode": mode, "f1_gap_to_full": gap, "speedup_vs_full": speedup}


def test_frontier_keeps_only_undominated_strategies() -> None:
    from load_tests.eval.frontier import frontier

    rows = [
        _row("full", 0.0, 1.0),
        _row("reuse", -0.15, 8.0),
        _row("blend@0.15", -0.01, 4.0),
        _row("blend@0.15/heads=0", -0.03, 4.0),  # same speed, worse answers
        _row("blend@0.3", 0.0, 2.5),
    ]
    assert [row["mode"] for row in frontier(rows)] == ["reuse", "blend@0.15", "blend@0.3"]


def test_runs_with_another_chunk_prefix_are_tagged() -> None:
    from load_tests.eval.frontier import tagged_rows

    rows = [_row("full", 0.0, 1.0), _row("blend@0.15", -0.01, 4.0)]
    chat = tagged_rows({"settings": {"chunk_prefix": "chat"}, "rows": rows})
    assert [row["mode"] for row in chat] == ["full", "blend@0.15 [chat prefix]"]
    assert tagged_rows({"settings": {}, "rows": rows}) == rows


def test_benchmark_speed_replaces_the_evaluations_own_and_drops_untimed_modes() -> None:
    from load_tests.eval.frontier import tagged_rows, with_benchmark_speed

    document = {
        "settings": {"chunk_prefix": "passages"},
        "rows": [
            _row("full", 0.0, 1.0),
            _row("neighbours:blend@0.1/metric=probe", -0.01, 3.1),
            _row("neighbours:blend@0.15/check=1:1", -0.02, 2.0),
            _row("neighbours:reuse", 0.02, 4.0),
        ],
    }
    sweep = {
        "rows": [
            {"context_tokens": 3072, "mode": "full", "speedup_vs_full": 1.0},
            {"context_tokens": 3072, "mode": "blend@0.1/metric=probe", "speedup_vs_full": 6.4},
            {"context_tokens": 3072, "mode": "blend@0.15/check=1:1", "speedup_vs_full": 4.2},
            {"context_tokens": 8192, "mode": "reuse", "speedup_vs_full": 40.0},
        ]
    }
    timed = with_benchmark_speed(tagged_rows(document), sweep, 3072)
    assert [(row["f1_gap_to_full"], row["speedup_vs_full"]) for row in timed] == [
        (0.0, 1.0),
        (-0.01, 6.4),
        (-0.02, 4.2),
    ]
