"""Per-request blending: the plan sent to the engine and the summary returned to the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.connector.plan import BlendPlan
from engine.runtime import Engine
from gateway.protocol import BlendOptions
from gateway.rag_prompt import ChunkedPrompt
from gateway.settings import Settings


@dataclass(frozen=True)
class BlendRequest:
    token_ids: list[int]
    plan: BlendPlan

    @property
    def cache_salt(self) -> str | None:
        """Blended KV is approximate: vLLM's prefix cache shares it only with the same recipe."""
        if self.plan.mode == "full":
            return None
        return f"ragblend:{self.plan.mode}:{self.plan.recompute_ratio}"

    @property
    def extra_args(self) -> dict[str, Any] | None:
        if self.plan.mode == "full":
            return None
        return {"kv_transfer_params": self.plan.to_params()}


def blend_request(
    prompt: ChunkedPrompt, options: BlendOptions | None, settings: Settings, engine: Engine
) -> BlendRequest:
    options = options or BlendOptions()
    mode = options.mode or settings.blend_mode
    if not engine.blending:
        mode = "full"
    ratio = settings.blend_recompute_ratio
    if options.recompute_ratio is not None:
        ratio = options.recompute_ratio
    return BlendRequest(prompt.token_ids, BlendPlan(mode, ratio, prompt.spans))


def blend_summary(
    plan: BlendPlan, stats: dict[str, Any] | None, prompt_tokens: int, cached_tokens: int
) -> dict[str, Any]:
    """What the response reports. Without worker statistics no chunk was blended: vLLM's prefix
    cache served the whole chunk region, or the request was a full prefill."""
    if stats is not None:
        return {key: stats[key] for key in SUMMARY_KEYS}
    return {
        "mode": plan.mode,
        "reused_tokens": 0,
        "recomputed_tokens": prompt_tokens - cached_tokens,
        "chunks_hit": 0,
        "chunks_missed": 0,
        "prefix_cached_tokens": cached_tokens,
    }


SUMMARY_KEYS = (
    "mode",
    "reused_tokens",
    "recomputed_tokens",
    "chunks_hit",
    "chunks_missed",
    "prefix_cached_tokens",
)
