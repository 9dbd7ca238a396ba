"""A request's `blend` options against the server's recipes: what the engine is asked to do."""

import pytest
from pydantic import ValidationError

from engine.contract import ChunkSpan
from gateway.openai.protocol import BlendOptions
from gateway.rag.blending import blend_plan, blend_summary
from gateway.rag.chunked_prompt import ChunkedPrompt
from gateway.settings import Settings

PROMPT = ChunkedPrompt(list(range(40)), (ChunkSpan(2, 20), ChunkSpan(20, 38)))
SETTINGS = Settings(model="m", blend_in_context_metric="probe", blend_metric="v")


def test_the_recipe_follows_where_the_chunks_were_computed() -> None:
    behind_prefix = blend_plan(PROMPT, None, SETTINGS, blending=True).recipe
    in_context = blend_plan(PROMPT, None, SETTINGS, blending=True, context="library").recipe
    assert (behind_prefix.recompute_ratio, behind_prefix.metric) == (
        SETTINGS.blend_recompute_ratio,
        "v",
    )
    assert (in_context.recompute_ratio, in_context.metric) == (
        SETTINGS.blend_in_context_ratio,
        "probe",
    )
    assert behind_prefix.chunk_head_tokens == in_context.chunk_head_tokens == 8


def test_a_request_may_choose_its_ratio_and_metric() -> None:
    options = BlendOptions(recompute_ratio=0.3, metric="v")
    plan = blend_plan(PROMPT, options, SETTINGS, blending=True, context="learnt")
    assert (plan.recipe.mode, plan.recipe.recompute_ratio, plan.recipe.metric) == (
        "blend",
        0.3,
        "v",
    )
    assert blend_summary(plan, None, 40, 0)["metric"] == "v"


def test_a_request_that_reuses_recomputes_no_chunk_heads_over_a_server_that_blends() -> None:
    reuse = blend_plan(PROMPT, BlendOptions(mode="reuse"), SETTINGS, blending=True).recipe
    assert (reuse.mode, reuse.ratio, reuse.chunk_head_tokens) == ("reuse", 0.0, 0)
    server_reuses = Settings(model="m", blend_mode="reuse")
    blend = blend_plan(PROMPT, BlendOptions(mode="blend"), server_reuses, blending=True).recipe
    assert (blend.mode, blend.chunk_head_tokens) == ("blend", 8)


def test_an_engine_that_cannot_blend_makes_every_request_full() -> None:
    plan = blend_plan(PROMPT, BlendOptions(mode="blend"), SETTINGS, blending=False)
    assert plan.recipe.mode == "full" and plan.cache_salt is None
    assert "metric" not in blend_summary(plan, None, 40, 0)


@pytest.mark.parametrize("metric", ["probe!", "V", 3])
def test_an_unknown_metric_is_refused(metric: object) -> None:
    with pytest.raises(ValidationError, match="metric"):
        BlendOptions(metric=metric)


def test_an_unknown_metric_gets_an_openai_error_naming_the_field() -> None:
    from fastapi.testclient import TestClient

    from gateway.app import create_app

    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Which city?"}],
        "documents": ["Oslo hosts it."],
        "blend": {"metric": "loudest"},
    }
    client = TestClient(create_app(Settings(model="m")))  # no lifespan: no engine is started
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and "metric" in str(error["param"])
