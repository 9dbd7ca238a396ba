"""Per-request blending: the plan sent to the engine and the summary returned to the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.contract import BlendPlan, BlendStats, SelectionOverrides
from gateway.openai.protocol import BlendOptions
from gateway.rag.chunked_prompt import ChunkedPrompt
from gateway.settings import Settings


@dataclass(frozen=True)
class BlendRequest:
    """A prompt with chunks, in the one shape the engine's connector receives it."""

    token_ids: list[int]
    plan: BlendPlan

    @property
    def cache_salt(self) -> str | None:
        return self.plan.cache_salt

    @property
    def extra_args(self) -> dict[str, Any] | None:
        return self.plan.extra_args()


def blend_request(
    prompt: ChunkedPrompt,
    options: BlendOptions | None,
    settings: Settings,
    blending: bool,
    in_context: bool = False,
) -> BlendRequest:
    """The plan of a prompt whose chunks were precomputed behind their neighbours
    (``in_context``) or behind the fixed prefix; the request's options override the recipe.
    Without ``blending`` (the engine cannot blend this model) every request is a full prefill."""
    options = options or BlendOptions()
    mode = options.mode or settings.blend_mode
    if not blending:
        mode = "full"
    recipe = settings.blend_recipe(in_context)
    ratio = recipe.recompute_ratio
    if options.recompute_ratio is not None:
        ratio = options.recompute_ratio
    overrides = SelectionOverrides(metric=options.metric or recipe.metric)
    return BlendRequest(prompt.token_ids, BlendPlan(mode, ratio, prompt.spans, overrides))


def blend_summary(
    plan: BlendPlan, stats: BlendStats | None, prompt_tokens: int, cached_tokens: int
) -> dict[str, Any]:
    """What the response reports. Without worker statistics no chunk was blended: vLLM's prefix
    cache served the whole chunk region, or the request was a full prefill."""
    if stats is None:
        stats = BlendStats.without_blend(plan.mode, prompt_tokens, cached_tokens)
    summary = stats.summary()
    if plan.mode == "blend":
        summary["metric"] = plan.overrides.metric
    return summary
