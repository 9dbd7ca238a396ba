"""Per-request blending: the plan sent to the engine and the summary returned to the client."""

from __future__ import annotations

from typing import Any

from engine.contract import BlendPlan, BlendStats
from gateway.openai.protocol import BlendOptions
from gateway.rag.chunked_prompt import ChunkContext, ChunkedPrompt
from gateway.settings import Settings


def blend_plan(
    prompt: ChunkedPrompt,
    options: BlendOptions | None,
    settings: Settings,
    blending: bool,
    context: ChunkContext = "cold",
) -> BlendPlan:
    """The plan of a prompt whose chunks' KV was computed in ``context``: behind the fixed
    prefix (``cold``), or behind text like what stands before them here (``library``
    neighbours, ``learnt`` companions), which takes the in-context recipe, or exactly as a
    prefill of this prompt computes it (``exact``), which is reused with nothing recomputed
    unless the request chooses a recipe; the request's options over it, resolved whole here.
    Without ``blending`` (the engine cannot blend this model) every request is a full
    prefill."""
    options = options or BlendOptions()
    chosen = (options.mode, options.recompute_ratio, options.metric) != (None, None, None)
    mode = options.mode or (None if chosen or context != "exact" else "reuse")
    if not blending:
        mode = "full"
    recipe = settings.blend_recipe(context != "cold").choose(
        mode=mode, recompute_ratio=options.recompute_ratio, metric=options.metric
    )
    return BlendPlan(recipe, prompt.spans)


def blend_summary(
    plan: BlendPlan,
    stats: BlendStats | None,
    prompt_tokens: int,
    cached_tokens: int,
    context: ChunkContext = "cold",
) -> dict[str, Any]:
    """What the response reports, with the ``context`` the chunks' KV was computed in. Without
    worker statistics no chunk was blended: vLLM's prefix cache served the whole chunk region,
    or the request was a full prefill."""
    if stats is None:
        stats = BlendStats.without_blend(plan.recipe.mode, prompt_tokens, cached_tokens)
    summary = {**stats.summary(), "context": context}
    if plan.recipe.mode == "blend":
        summary["metric"] = plan.recipe.metric
    return summary
