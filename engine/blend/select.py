"""HKVD token selection: which tokens to recompute in the next layers.

Tokens whose fresh K/V deviate most from the cached (re-positioned) K/V are the ones that missed
cross-chunk attention; they are recomputed, together with tokens that have no cache at all.

Under tensor parallelism each rank holds only some heads, so every per-token score is a partial
sum over heads. The caller passes a ``HeadSum`` that completes it across ranks (vLLM's
all-reduce) before anything is divided or ranked, so that every rank selects the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import torch
from torch import Tensor

from engine.contract import DEVIATION_METRICS, CheckLayers, Metric

_EPS = 1e-6

HeadSum = Callable[[Tensor], Tensor]
"""Completes a per-token sum over this rank's heads into the sum over all heads (all ranks)."""


def local_heads_only(partial: Tensor) -> Tensor:
    """The ``HeadSum`` of a model that is not split: this process holds every head."""
    return partial


def _token_norm(x: Tensor) -> Tensor:
    """L2 norm over head_dim summed over heads: [num_tokens, heads, dim] -> [num_tokens]."""
    return torch.linalg.vector_norm(x.float(), dim=-1).sum(dim=-1)


def _deviation(fresh: Tensor, cached: Tensor, normalize: bool, sum_heads: HeadSum) -> Tensor:
    if fresh.shape != cached.shape or fresh.dim() != 3:
        raise ValueError(
            f"fresh and cached must share a [num_tokens, heads, dim] shape, "
            f"got {tuple(fresh.shape)} and {tuple(cached.shape)}"
        )
    deviation = sum_heads(_token_norm(fresh.float() - cached.float()))
    if normalize:
        deviation = deviation / sum_heads(_token_norm(cached)).clamp_min(_EPS)
    return deviation


def kv_deviation(
    fresh_k: Tensor,
    fresh_v: Tensor,
    cached_k: Tensor,
    cached_v: Tensor,
    metric: Metric,
    normalize: bool,
    sum_heads: HeadSum = local_heads_only,
) -> Tensor:
    """Per-token deviation [num_tokens] (fp32) of fresh from cached K and/or V.

    For each token, the L2 distance over head_dim is summed over heads (``sum_heads`` adds the
    other ranks' heads). With `normalize`, it is divided by the cached tensor's norm taken the
    same way; for "kv" the K and V terms are normalized separately and added.
    """
    if metric not in DEVIATION_METRICS:
        raise ValueError(f"metric must be 'k', 'v' or 'kv', got {metric!r}")
    total = torch.zeros(fresh_k.shape[0], dtype=torch.float32, device=fresh_k.device)
    if metric in ("k", "kv"):
        total = total + _deviation(fresh_k, cached_k, normalize, sum_heads)
    if metric in ("v", "kv"):
        total = total + _deviation(fresh_v, cached_v, normalize, sum_heads)
    return total


def question_attention(
    queries: Tensor,
    query_positions: Tensor,
    keys: Tensor,
    scale: float,
    sum_heads: HeadSum = local_heads_only,
) -> Tensor:
    """Attention mass [num_keys] (fp32) the question's queries put on each key position.

    queries: [num_queries, heads, dim] at prompt positions ``query_positions``; keys:
    [num_keys, kv_heads, dim] for positions 0..num_keys-1. Each query's causal softmax over the
    keys up to its own position, summed over queries and heads (``sum_heads`` adds the other
    ranks' heads).
    """
    heads, kv_heads = queries.shape[1], keys.shape[1]
    expanded = keys.float().repeat_interleave(heads // kv_heads, dim=1)
    logits = torch.einsum("qhd,khd->hqk", queries.float(), expanded) * scale
    key_positions = torch.arange(keys.shape[0], device=keys.device)
    future = key_positions[None, :] > query_positions.to(keys.device)[:, None]
    logits.masked_fill_(future[None], float("-inf"))
    return sum_heads(logits.softmax(dim=-1).sum(dim=(0, 1)))


def fraction_count(fraction: float, num: int) -> int:
    """round(fraction * num), at least 1 when fraction > 0 and num > 0."""
    if fraction <= 0 or num == 0:
        return 0
    return min(num, max(1, round(fraction * num)))


def select_top(
    deviation: Tensor,
    candidates: Tensor,
    ratio_or_count: float | int,
    forced: Tensor,
) -> Tensor:
    """Sorted unique token indices: the most deviating candidates plus all `forced` tokens.

    `deviation` is indexed by token ([num_tokens]); `candidates` and `forced` are index tensors.
    A float in [0, 1] is a share of the candidates, an int a count. The count is taken among
    candidates not already forced and is clamped to how many there are.
    """
    if deviation.dim() != 1:
        raise ValueError(f"deviation must be 1-D, got shape {tuple(deviation.shape)}")
    if isinstance(ratio_or_count, bool):
        raise TypeError("ratio_or_count must be a float share or an int count, not a bool")
    forced = forced.to(device=deviation.device, dtype=torch.long).reshape(-1)
    candidates = candidates.to(device=deviation.device, dtype=torch.long).reshape(-1).unique()
    if isinstance(ratio_or_count, float):
        if not 0.0 <= ratio_or_count <= 1.0:
            raise ValueError(f"ratio must be in [0, 1], got {ratio_or_count}")
        count = fraction_count(ratio_or_count, candidates.numel())
    else:
        if ratio_or_count < 0:
            raise ValueError(f"count must be >= 0, got {ratio_or_count}")
        count = ratio_or_count
    open_candidates = candidates[~torch.isin(candidates, forced)]
    count = min(count, open_candidates.numel())
    top = deviation[open_candidates].topk(count).indices
    return torch.cat((open_candidates[top], forced)).unique(sorted=True)


def top_rows(
    scores: Tensor, forced: Tensor, num_forced: int, count: int, eligible: Tensor | None = None
) -> Tensor:
    """Sorted row indices: every ``forced`` row and the ``count`` highest scoring other rows
    (among the ``eligible`` ones, default all), as ``select_top`` picks them but without
    reading anything back from the device: ``num_forced`` (how many rows ``forced`` marks) and
    ``count`` (at most how many others are eligible) come from the caller, who knows them.

    ``scores`` [num_rows] are finite; ``forced`` and ``eligible`` are boolean masks alike.
    """
    if scores.dim() != 1 or forced.shape != scores.shape:
        raise ValueError(
            f"scores and forced must be 1-D and alike, got {tuple(scores.shape)}, "
            f"{tuple(forced.shape)}"
        )
    if num_forced < 0 or count < 0 or num_forced + count > scores.shape[0]:
        raise ValueError(f"cannot pick {num_forced} + {count} of {scores.shape[0]} rows")
    ranked = scores.float()
    if eligible is not None:
        ranked = ranked.masked_fill(~eligible, float("-inf"))
    ranked = ranked.masked_fill(forced, float("inf"))
    return ranked.topk(num_forced + count).indices.sort().values


@dataclass(frozen=True)
class GradualSchedule:
    """Check layers at which the recomputed set narrows: (layer_index, keep_fraction) pairs.

    Fractions are shares of the initial candidates (all cached tokens), e.g.
    ((1, 0.3), (2, 0.15)) keeps 30% after layer 1 and 15% after layer 2. Layers must increase
    strictly and fractions, each in (0, 1], must not increase.
    """

    checkpoints: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        points = tuple((int(layer), float(fraction)) for layer, fraction in self.checkpoints)
        object.__setattr__(self, "checkpoints", points)
        if not points:
            raise ValueError("a gradual schedule needs at least one check layer")
        for layer, fraction in points:
            if layer < 0:
                raise ValueError(f"check layer must be >= 0, got {layer}")
            if not 0.0 < fraction <= 1.0:
                raise ValueError(f"keep fraction must be in (0, 1], got {fraction} at {layer}")
        for (layer_a, frac_a), (layer_b, frac_b) in pairwise(points):
            if layer_b <= layer_a:
                raise ValueError(f"check layers must increase strictly: {layer_a}, {layer_b}")
            if frac_b > frac_a:
                raise ValueError(f"keep fractions must not increase: {frac_a}, {frac_b}")


def gradual_schedule(ratio: float, check_layers: CheckLayers) -> GradualSchedule | None:
    """The schedule of a ratio shaped over check layers by multiples; None when every token or
    none is recomputed (nothing to narrow)."""
    if ratio <= 0 or ratio >= 1:
        return None
    return GradualSchedule(tuple((layer, min(1.0, ratio * scale)) for layer, scale in check_layers))


def keep_count(schedule: GradualSchedule, layer: int, num_candidates: int) -> int | None:
    """How many candidates survive check layer `layer`; None if `layer` is not a check layer."""
    for check_layer, fraction in schedule.checkpoints:
        if check_layer == layer:
            return fraction_count(fraction, num_candidates)
    return None
