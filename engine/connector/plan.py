"""The per-request blending plan, carried to the engine in ``kv_transfer_params``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from engine.blend.select import Metric

Mode = Literal["blend", "reuse", "full"]
MODES: tuple[Mode, ...] = ("blend", "reuse", "full")
PARAMS_KEY = "ragblend"
EVICT_KEY = "ragblend_evict"
"""Chunks (token-id lists) whose stored KV a request asks the worker to delete."""


@dataclass(frozen=True)
class ChunkSpan:
    """Prompt positions [start, end) holding one chunk, tokenized on its own."""

    start: int
    end: int


@dataclass(frozen=True)
class SelectionOverrides:
    """Per-request replacements for the server's selection settings (evaluations sweep these)."""

    check_layers: tuple[tuple[int, float], ...] | None = None
    metric: Metric | None = None
    normalize: bool | None = None
    chunk_head_tokens: int | None = None

    def to_params(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_params(cls, body: dict[str, Any]) -> SelectionOverrides:
        layers = body.get("check_layers")
        if layers is not None:
            layers = tuple((int(layer), float(scale)) for layer, scale in layers)
        return cls(
            check_layers=layers,
            metric=body.get("metric"),
            normalize=body.get("normalize"),
            chunk_head_tokens=body.get("chunk_head_tokens"),
        )


@dataclass(frozen=True)
class BlendPlan:
    mode: Mode
    recompute_ratio: float
    spans: tuple[ChunkSpan, ...]
    overrides: SelectionOverrides = SelectionOverrides()

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

    def claim_end(self, num_prompt_tokens: int, default_metric: Metric) -> int:
        """Prompt tokens the connector computes; vLLM computes the rest, at least the last one.

        Usually the chunk region; selection by the question's attention needs the question
        blended too, so it claims all but the last prompt token.
        """
        if not self.spans or self.mode == "full":
            return 0
        metric = self.overrides.metric or default_metric
        asks_question = self.mode == "blend" and metric == "attn"
        end = num_prompt_tokens if asks_question else self.spans[-1].end
        return min(end, num_prompt_tokens - 1)

    def to_params(self) -> dict[str, Any]:
        return {
            PARAMS_KEY: {
                "mode": self.mode,
                "recompute_ratio": self.recompute_ratio,
                "spans": [[span.start, span.end] for span in self.spans],
                "overrides": self.overrides.to_params(),
            }
        }

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> BlendPlan | None:
        body = (params or {}).get(PARAMS_KEY)
        if body is None:
            return None
        spans = tuple(ChunkSpan(int(start), int(end)) for start, end in body["spans"])
        overrides = SelectionOverrides.from_params(body.get("overrides", {}))
        return cls(body["mode"], float(body["recompute_ratio"]), spans, overrides)


def eviction_params(chunks: list[list[int]]) -> dict[str, Any]:
    return {EVICT_KEY: [list(chunk) for chunk in chunks]}


def evictions_in(params: dict[str, Any] | None) -> list[list[int]]:
    return [[int(token) for token in chunk] for chunk in (params or {}).get(EVICT_KEY, [])]
