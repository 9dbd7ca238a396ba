"""The recipe: how a blended request's chunk region is computed, declared once.

The gateway resolves a recipe whole for every request (the server's default, then the recipe of
library chunks precomputed behind their neighbours, then the request's own ``blend`` options)
and it rides inside the plan. The scheduler and the worker read nothing else about blending, and
the blend maths (``engine.blend``) take it as it is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from engine.contract.types import (
    DEFAULT_BUDGET_MASS,
    DEFAULT_CHECK_LAYERS,
    DEFAULT_CHUNK_HEAD_TOKENS,
    DEFAULT_METRIC,
    DEFAULT_MODE,
    DEFAULT_QUESTION_POOL,
    DEFAULT_RECOMPUTE_RATIO,
    METRICS,
    MODES,
    QUESTION_METRICS,
    CheckLayers,
    Metric,
    Mode,
    parse_check_layer_pairs,
)


@dataclass(frozen=True)
class Recipe:
    """How many chunk tokens are recomputed and how they are chosen."""

    mode: Mode = DEFAULT_MODE
    recompute_ratio: float = DEFAULT_RECOMPUTE_RATIO
    """In ``blend`` mode: the share of cached chunk tokens recomputed (chunk heads included)."""
    metric: Metric = DEFAULT_METRIC
    check_layers: CheckLayers = DEFAULT_CHECK_LAYERS
    """Gradual filtering: after layer L keep ``multiple x ratio`` of the cached chunk tokens."""
    chunk_head_tokens: int = DEFAULT_CHUNK_HEAD_TOKENS
    """Leading tokens of every chunk always recomputed: alone, they sat right after the fixed
    prefix, where attention behaves differently (attention sinks), so their cache fits least."""
    normalize: bool = False
    """Deviations are normalized per token before they are compared."""
    question_pool: float = DEFAULT_QUESTION_POOL
    """Metric "qv": the question's relevance pool, in multiples of what a check layer keeps."""
    budget_mass: float = DEFAULT_BUDGET_MASS
    """Below 1: a check layer keeps only the tokens holding this share of the total score."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 <= self.recompute_ratio <= 1.0:
            raise ValueError(f"recompute_ratio must be in [0, 1], got {self.recompute_ratio}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        parse_check_layer_pairs(self.check_layers)
        if self.chunk_head_tokens < 0:
            raise ValueError("chunk_head_tokens must not be negative")
        if not self.question_pool >= 1:
            raise ValueError(f"question_pool must be at least 1, got {self.question_pool}")
        if not 0 < self.budget_mass <= 1:
            raise ValueError(f"budget_mass must be in (0, 1], got {self.budget_mass}")

    @classmethod
    def exact(cls) -> Recipe:
        """Every token computed: a full prefill of the region."""
        return cls("full", 1.0, chunk_head_tokens=0)

    @property
    def ratio(self) -> float:
        """The share actually recomputed: 1 in ``full`` mode, 0 in ``reuse`` mode."""
        return {"full": 1.0, "reuse": 0.0}.get(self.mode, self.recompute_ratio)

    @property
    def asks_question(self) -> bool:
        """Selection by the question's attention: the question is blended with the chunks."""
        return self.mode == "blend" and self.metric in QUESTION_METRICS

    def choose(self, **choices: Any) -> Recipe:
        """This recipe with ``choices`` (None: keep this recipe's value). A recipe that ends up
        recomputing nothing recomputes no chunk heads either, unless they were chosen."""
        chosen = {name: value for name, value in choices.items() if value is not None}
        recipe = replace(self, **chosen)
        if recipe.ratio == 0 and "chunk_head_tokens" not in chosen:
            recipe = replace(recipe, chunk_head_tokens=0)
        return recipe

    def salt(self) -> str:
        """Blended KV is approximate: vLLM's prefix cache shares it only with the same recipe."""
        return "ragblend:" + json.dumps(self.to_params(), sort_keys=True, separators=(",", ":"))

    def to_params(self) -> dict[str, Any]:
        body = asdict(self)
        body["check_layers"] = [list(pair) for pair in self.check_layers]
        return body

    @classmethod
    def from_params(cls, body: dict[str, Any]) -> Recipe:
        """Decode what ``to_params`` encoded; raises ``ValueError`` on anything malformed."""
        try:
            known = {field.name for field in fields(cls)}
            kept = {name: value for name, value in body.items() if name in known}
            kept["check_layers"] = parse_check_layer_pairs(kept["check_layers"])
            kept["recompute_ratio"] = float(kept["recompute_ratio"])
            kept["chunk_head_tokens"] = int(kept["chunk_head_tokens"])
            kept["normalize"] = bool(kept["normalize"])
            kept["question_pool"] = float(kept["question_pool"])
            kept["budget_mass"] = float(kept["budget_mass"])
            return cls(**kept)
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed recipe: {exc!r}") from exc
