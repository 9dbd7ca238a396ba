"""Per-request blending: the plan sent to the engine and the summary returned to the client."""

from __future__ import annotations

from typing import Any, Literal

from engine.contract import BlendPlan, BlendStats, ChunkSpan
from gateway.openai.protocol import BlendOptions
from gateway.rag.chunked_prompt import ChunkContext, ChunkedPrompt
from gateway.settings import Settings

ToolBlockSource = Literal["prefix_cache", "chunk_store", "computed"]


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
    unless the request chooses a recipe, or a tool catalog alone (``tools``, behind another
    system prompt), which takes its own recipe; the request's options over it, resolved whole
    here.
    Without ``blending`` (the engine cannot blend this model) every request is a full
    prefill."""
    options = options or BlendOptions()
    chosen = (options.mode, options.recompute_ratio, options.metric) != (None, None, None)
    mode = options.mode or (None if chosen or context != "exact" else "reuse")
    if not blending:
        mode = "full"
    server = settings.blend_recipe(context != "cold")
    if context == "tools":
        server = settings.tool_block_recipe()
    recipe = server.choose(
        mode=mode, recompute_ratio=options.recompute_ratio, metric=options.metric
    )
    return BlendPlan(recipe, prompt.spans)


def blend_summary(
    plan: BlendPlan,
    stats: BlendStats | None,
    prompt_tokens: int,
    cached_tokens: int,
    context: ChunkContext = "cold",
    tool_span: int | None = None,
) -> dict[str, Any]:
    """What the response reports, with the ``context`` the chunks' KV was computed in, and
    where the tool catalog's KV came from when ``tool_span`` (its span in the plan) is given.
    Without worker statistics no chunk was blended: vLLM's prefix cache served the whole chunk
    region, or the request was a full prefill."""
    worker = stats
    if stats is None:
        stats = BlendStats.without_blend(plan.recipe.mode, prompt_tokens, cached_tokens)
    summary = {**stats.summary(), "context": context}
    if plan.recipe.mode == "blend":
        summary["metric"] = plan.recipe.metric
    if tool_span is not None:
        span = plan.spans[tool_span]
        summary["tool_block"] = {
            "tokens": span.end - span.start,
            "source": _tool_block_source(span, tool_span, worker, cached_tokens),
        }
    return summary


def _tool_block_source(
    span: ChunkSpan, position: int, stats: BlendStats | None, cached_tokens: int
) -> ToolBlockSource:
    """``prefix_cache`` (vLLM's, the same prompt head as before: all of it, or all but a tail
    that vLLM computed exactly without a blend), ``chunk_store`` (reused behind this prompt's
    own head), or ``computed``."""
    if stats is None:
        return "prefix_cache" if cached_tokens > span.start else "computed"
    if stats.prefix_cached_tokens >= span.end:
        return "prefix_cache"
    if not stats.fell_back and position in stats.hit_positions:
        return "chunk_store"
    return "computed"
