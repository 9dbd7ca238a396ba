"""The blend plan: how one request's chunk region is filled, gateway -> scheduler -> worker."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from engine.contract.types import (
    EVICT_KEY,
    METRICS,
    MODES,
    PLAN_KEY,
    QUESTION_METRICS,
    CheckLayers,
    Metric,
    Mode,
    parse_check_layer_pairs,
)


@dataclass(frozen=True)
class ChunkSpan:
    """Prompt positions [start, end) holding one chunk, tokenized on its own."""

    start: int
    end: int


@dataclass(frozen=True)
class SelectionOverrides:
    """Per-request replacements for the server's selection settings (evaluations sweep these)."""

    check_layers: CheckLayers | None = None
    metric: Metric | None = None
    normalize: bool | None = None
    chunk_head_tokens: int | None = None
    question_pool: float | None = None
    budget_mass: float | None = None

    def __post_init__(self) -> None:
        if self.metric is not None and self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.chunk_head_tokens is not None and self.chunk_head_tokens < 0:
            raise ValueError("chunk_head_tokens must not be negative")
        if self.question_pool is not None and not self.question_pool >= 1:
            raise ValueError(f"question_pool must be at least 1, got {self.question_pool}")
        if self.budget_mass is not None and not 0 < self.budget_mass <= 1:
            raise ValueError(f"budget_mass must be in (0, 1], got {self.budget_mass}")

    def to_params(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_params(cls, body: dict[str, Any]) -> SelectionOverrides:
        layers = body.get("check_layers")
        normalize = body.get("normalize")
        heads = body.get("chunk_head_tokens")
        pool, mass = body.get("question_pool"), body.get("budget_mass")
        return cls(
            check_layers=None if layers is None else parse_check_layer_pairs(layers),
            metric=body.get("metric"),
            normalize=None if normalize is None else bool(normalize),
            chunk_head_tokens=None if heads is None else int(heads),
            question_pool=None if pool is None else float(pool),
            budget_mass=None if mass is None else float(mass),
        )


@dataclass(frozen=True)
class BlendPlan:
    """How one request's chunk region is filled; travels gateway -> scheduler -> worker."""

    mode: Mode
    recompute_ratio: float
    spans: tuple[ChunkSpan, ...]
    overrides: SelectionOverrides = SelectionOverrides()
    store_behind_context: bool = False
    """Store a missed chunk that starts where the chunk prefix would end although other tokens
    than the prefix stand before it: its entry then holds the KV computed behind them. Only
    contextual precompute requests set it (``ChunkCache.precompute`` with ``context``)."""
    replace_stored: bool = False
    """Compute every chunk even when an entry is stored, and store the result in its place. The
    old entry serves other requests until the new one is written (in this same worker pass), so
    a refresh never turns a concurrent request's hit into a miss. Only refreshing precompute
    requests set it (``ChunkCache.precompute`` with ``replace``)."""
    stats_id: str = ""
    """The id the front end knows the request by; the worker reports the request's statistics
    to it under this id (``Engine.generate`` sets it). Empty: to the scheduler only."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 <= self.recompute_ratio <= 1.0:
            raise ValueError(f"recompute_ratio must be in [0, 1], got {self.recompute_ratio}")
        previous_end = 0
        for span in self.spans:
            if not previous_end <= span.start < span.end:
                raise ValueError("chunk spans must be non-empty, ordered and not overlap")
            previous_end = span.end

    @property
    def effective_ratio(self) -> float:
        return {"full": 1.0, "reuse": 0.0}.get(self.mode, self.recompute_ratio)

    @property
    def cache_salt(self) -> str | None:
        """Blended KV is approximate: vLLM's prefix cache shares it only with the same recipe."""
        if self.mode == "full":
            return None
        salt = f"ragblend:{self.mode}:{self.recompute_ratio}"
        overrides = self.overrides.to_params()
        if overrides:
            salt += ":" + json.dumps(overrides, sort_keys=True, separators=(",", ":"))
        return salt

    def claim_end(self, num_prompt_tokens: int, default_metric: Metric) -> int:
        """Prompt tokens the connector computes; vLLM computes the rest, at least the last one.

        Usually the chunk region; selection by the question's attention ("attn", "qv") needs
        the question blended too, so it claims all but the last prompt token.
        """
        if not self.spans or self.mode == "full":
            return 0
        metric = self.overrides.metric or default_metric
        asks_question = self.mode == "blend" and metric in QUESTION_METRICS
        end = num_prompt_tokens if asks_question else self.spans[-1].end
        return min(end, num_prompt_tokens - 1)

    def to_params(self) -> dict[str, Any]:
        """``kv_transfer_params`` for the engine; None-equivalent (empty) for a full prefill."""
        if self.mode == "full":
            return {}
        body = {
            "mode": self.mode,
            "recompute_ratio": self.recompute_ratio,
            "spans": [[span.start, span.end] for span in self.spans],
            "overrides": self.overrides.to_params(),
        }
        if self.store_behind_context:
            body["store_behind_context"] = True
        if self.replace_stored:
            body["replace_stored"] = True
        if self.stats_id:
            body["stats_id"] = self.stats_id
        return {PLAN_KEY: body}

    def extra_args(self) -> dict[str, Any] | None:
        """``SamplingParams.extra_args`` carrying this plan to the connector; None: full."""
        params = self.to_params()
        return {"kv_transfer_params": params} if params else None

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> BlendPlan | None:
        """Decode what ``to_params`` encoded; raises ``ValueError`` on anything malformed."""
        body = (params or {}).get(PLAN_KEY)
        if body is None:
            return None
        try:
            spans = tuple(ChunkSpan(int(start), int(end)) for start, end in body["spans"])
            overrides = SelectionOverrides.from_params(body.get("overrides") or {})
            behind_context = bool(body.get("store_behind_context", False))
            replace = bool(body.get("replace_stored", False))
            stats_id = str(body.get("stats_id", ""))
            ratio = float(body["recompute_ratio"])
            return cls(body["mode"], ratio, spans, overrides, behind_context, replace, stats_id)
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed blend plan: {exc!r}") from exc


def eviction_params(chunks: list[list[int]]) -> dict[str, Any]:
    """``kv_transfer_params`` asking the worker to delete these chunks' stored KV."""
    return {EVICT_KEY: [list(chunk) for chunk in chunks]}


def evictions_in(params: dict[str, Any] | None) -> list[list[int]]:
    return [[int(token) for token in chunk] for chunk in (params or {}).get(EVICT_KEY, [])]
