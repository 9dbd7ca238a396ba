from __future__ import annotations

import pytest

from engine.connector.plan import BlendPlan, ChunkSpan, SelectionOverrides


def test_plan_round_trips_through_request_params() -> None:
    overrides = SelectionOverrides(check_layers=((1, 1.0),), metric="kv", chunk_head_tokens=0)
    plan = BlendPlan("blend", 0.1, (ChunkSpan(1, 5), ChunkSpan(5, 9)), overrides)
    assert BlendPlan.from_params(plan.to_params()) == plan


def test_plan_without_overrides_keeps_server_settings() -> None:
    plan = BlendPlan("reuse", 0.0, (ChunkSpan(0, 3),))
    params = plan.to_params()
    assert params["ragblend"]["overrides"] == {}
    assert BlendPlan.from_params(params).overrides == SelectionOverrides()


@pytest.mark.parametrize("spans", [((2, 2),), ((0, 4), (3, 6))])
def test_plan_rejects_empty_or_overlapping_spans(spans: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="spans"):
        BlendPlan("blend", 0.15, tuple(ChunkSpan(*span) for span in spans))


def test_attention_selection_claims_the_question_but_not_the_last_token() -> None:
    spans = (ChunkSpan(1, 5), ChunkSpan(5, 9))
    plain = BlendPlan("blend", 0.15, spans)
    by_attention = BlendPlan("blend", 0.15, spans, SelectionOverrides(metric="attn"))
    assert plain.claim_end(num_prompt_tokens=14, default_metric="v") == 9
    assert plain.claim_end(num_prompt_tokens=14, default_metric="attn") == 13
    assert by_attention.claim_end(num_prompt_tokens=14, default_metric="v") == 13
    assert BlendPlan("reuse", 0.0, spans).claim_end(14, "attn") == 9
    assert BlendPlan("full", 1.0, spans).claim_end(14, "v") == 0
