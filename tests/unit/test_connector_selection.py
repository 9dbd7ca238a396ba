"""What a job recomputes: its plan's selection overrides over the server's settings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.blend.fuse import Selection
from engine.connector.metadata import BlendJob
from engine.contract import DEFAULT_CHECK_LAYERS, BlendPlan, BlendSettings, ChunkSpan
from engine.contract import SelectionOverrides as Overrides

SETTINGS = BlendSettings("m", "/data/chunk_kv", 1 << 20, None, (1,))
SPANS = (ChunkSpan(1, 20), ChunkSpan(20, 40))
NONE = Overrides()


def _job(mode: str = "blend", ratio: float = 0.3, overrides: Overrides = NONE) -> BlendJob:
    plan = BlendPlan(mode, ratio, SPANS, overrides)  # type: ignore[arg-type]
    return BlendJob("r", list(range(45)), [0], 10, 44, plan)


def test_the_defaults_are_v_deviation_at_a_fixed_ratio() -> None:
    selection = _job().selection(0.3, SETTINGS)
    assert selection == Selection(0.3, DEFAULT_CHECK_LAYERS, "v", False, 8, 3.0, 1.0)
    assert selection == Selection(0.3, chunk_head_tokens=8)


def test_plan_overrides_and_server_settings_choose_the_strategy() -> None:
    two_stage = Overrides(metric="qv", question_pool=2.0, budget_mass=0.5)
    selection = _job(overrides=two_stage).selection(0.1, SETTINGS)
    assert (selection.metric, selection.question_pool, selection.budget_mass) == ("qv", 2.0, 0.5)
    server = replace(SETTINGS, metric="qv", question_pool=4.0, budget_mass=0.8)
    selection = _job().selection(0.1, server)
    assert (selection.metric, selection.question_pool, selection.budget_mass) == ("qv", 4.0, 0.8)


@pytest.mark.parametrize(
    ("mode", "overrides", "heads"),
    [("reuse", NONE, 0), ("blend", NONE, 0), ("blend", Overrides(chunk_head_tokens=16), 16)],
)
def test_at_ratio_zero_only_chunk_heads_the_plan_asks_for_are_recomputed(
    mode: str, overrides: Overrides, heads: int
) -> None:
    assert _job(mode, 0.0, overrides).selection(0.0, SETTINGS).chunk_head_tokens == heads


@pytest.mark.parametrize(("metric", "settled"), [("v", 10), ("attn", 0), ("qv", 0)])
def test_question_attention_reads_every_key_so_none_is_settled(metric: str, settled: int) -> None:
    assert _job().settled(attention_reads_cache=True, metric=metric) == settled
    assert _job().settled(attention_reads_cache=False, metric=metric) == 0
