"""Names and defaults both sides of the contract share: modes, metrics, check layers, keys."""

from __future__ import annotations

from typing import Any, Literal, get_args

Mode = Literal["blend", "reuse", "full"]
"""``blend``: reuse chunk KV, recompute a share; ``reuse``: recompute nothing; ``full``: exact."""
MODES: tuple[Mode, ...] = get_args(Mode)

Metric = Literal["k", "v", "kv", "attn", "qv", "probe"]
"""What picks tokens to recompute: K, V or K+V deviation from the cache, the question's
attention to each token ("attn"), or both in two stages ("qv": a pool of the tokens the question
attends to most, then the most V-deviating within it), or the question's attention probed over
the reused cache before any chunk token is computed ("probe": the chosen tokens are computed in
every layer, no layer is computed whole). The last three blend the question too."""
METRICS: tuple[Metric, ...] = get_args(Metric)
DEVIATION_METRICS: tuple[Metric, ...] = ("k", "v", "kv")
QUESTION_METRICS: tuple[Metric, ...] = ("attn", "qv", "probe")

CheckLayers = tuple[tuple[int, float], ...]
"""Gradual filtering: after layer L keep ``multiple x ratio`` of the cached chunk tokens."""

DEFAULT_MODE: Mode = "blend"
DEFAULT_RECOMPUTE_RATIO = 0.3
DEFAULT_CHECK_LAYERS: CheckLayers = ((1, 2.0), (2, 1.5), (3, 1.0))
DEFAULT_METRIC: Metric = "v"
DEFAULT_CHUNK_HEAD_TOKENS = 8
DEFAULT_QUESTION_POOL = 3.0
""""qv": the question's pool holds this many times the tokens a check layer keeps."""
DEFAULT_BUDGET_MASS = 1.0
"""Adaptive budget: a check layer keeps the fewest tokens holding this share of the candidates'
total score, at most the schedule's count; 1.0 always keeps the schedule's count."""

PLAN_KEY = "ragblend"
EVICT_KEY = "ragblend_evict"
EVICT_SALT_KEY = "ragblend_evict_salt"


def parse_check_layer_pairs(pairs: Any) -> CheckLayers:
    """``[[1, 2], [2, 1.5]]`` -> ((1, 2.0), (2, 1.5)); layers ascending, multiples positive."""
    layers = tuple((int(layer), float(multiple)) for layer, multiple in pairs)
    ordered = [layer for layer, _ in layers]
    if ordered != sorted(set(ordered)) or any(layer < 0 for layer in ordered):
        raise ValueError("check layers must be distinct, ascending and non-negative")
    if any(multiple <= 0 for _, multiple in layers):
        raise ValueError("check-layer multiples must be positive")
    return layers


def parse_check_layers(text: str) -> CheckLayers:
    """``"1:2,2:1.5,3:1"`` -> ((1, 2.0), (2, 1.5), (3, 1.0))."""
    try:
        pairs = [item.split(":") for item in text.split(",") if item.strip()]
        return parse_check_layer_pairs(pairs)
    except ValueError as exc:
        raise ValueError(f"check layers must look like '1:2,2:1.5,3:1': {exc}") from exc
