"""One check layer of the blend: which active tokens go on being recomputed.

The schedule says how many cached tokens a check layer keeps at most (``keep``); the selection's
strategy says which, and whether fewer do:

- one score: K/V deviation from the cache (HKVD) or the question's attention ("attn");
- two stages ("qv"): the question's attention narrows the candidates to a relevance pool of
  ``question_pool x keep`` tokens, then V deviation keeps ``keep`` of them. Once the active set
  is no wider than the pool (the later check layers), only V deviation narrows it;
- an adaptive budget (``budget_mass`` < 1): only as many tokens as hold that share of the
  candidates' total score (top-p), at most ``keep``, so a request whose deviation sits in a few
  tokens recomputes fewer.

Uncached tokens (prefix, question, chunk heads) always go on. Every score is complete over all
heads (``HeadSum``) before it is ranked or summed, so every tensor-parallel rank keeps the same
rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.blend.select import HeadSum, kv_deviation, question_attention, top_rows
from engine.contract import Metric, Recipe


@dataclass(frozen=True)
class CheckLayer:
    """What one check layer can score its active tokens by; each score is computed on demand."""

    queries: Tensor
    """Fresh queries of the active tokens [num_active, heads, dim]."""
    active: Tensor
    """Prompt positions of the active tokens, ascending."""
    fresh: tuple[Tensor, Tensor]
    """Fresh K and V of the active tokens [num_active, kv_heads, dim]."""
    cached: tuple[Tensor, Tensor]
    """The cache's (re-positioned) K and V at the active tokens."""
    keys: Tensor
    """The layer's fused keys for every prompt position [num_tokens, kv_heads, dim]."""
    question_rows: int
    """How many of the last active tokens are the question's (positions from where it starts:
    uncached, so always active)."""
    scale: float
    sum_heads: HeadSum

    def deviation(self, metric: Metric, normalize: bool) -> Tensor:
        """Per active token: how far its fresh K and/or V are from the cache's."""
        return kv_deviation(*self.fresh, *self.cached, metric, normalize, self.sum_heads)

    def question_attention(self) -> Tensor:
        """Per active token: the attention the question (the last ``question_rows`` active
        tokens) pays to it."""
        first = self.active.shape[0] - self.question_rows
        queries, positions = self.queries[first:], self.active[first:]
        return question_attention(queries, positions, self.keys, self.scale, self.sum_heads)[
            self.active
        ]


def mass_count(scores: Tensor, mass: float) -> int:
    """The fewest of ``scores`` (non-negative, 1-D) whose sum reaches ``mass`` of their total.

    ``mass`` 1 counts them all; nothing scoring above zero counts none.
    """
    if not 0 < mass <= 1:
        raise ValueError(f"mass must be in (0, 1], got {mass}")
    if mass == 1:
        return scores.numel()
    ordered = scores.float().sort(descending=True).values
    total = float(ordered.sum())
    if total <= 0:
        return 0
    reached = (ordered.cumsum(0) >= mass * total).nonzero()
    return int(reached[0]) + 1 if reached.numel() else scores.numel()


def rows_to_keep(
    layer: CheckLayer, is_cached: Tensor, keep: int, recipe: Recipe, num_cached: int | None = None
) -> Tensor:
    """Rows of ``layer.active`` that go on: every uncached one, and at most ``keep`` cached ones
    picked by the recipe's strategy (sorted row indices).

    ``num_cached`` is how many rows ``is_cached`` marks, which a blend knows on the host (None:
    it is read back, waiting for a GPU). Nothing else is read back but the adaptive budget's
    count (``budget_mass`` < 1), which the scores decide.
    """
    if num_cached is None:
        num_cached = int(is_cached.sum())
    eligible, available = is_cached, num_cached
    if recipe.metric == "qv":
        pool = math.ceil(recipe.question_pool * keep)
        if pool < num_cached:
            nothing = torch.zeros_like(is_cached)
            pooled = top_rows(layer.question_attention(), nothing, 0, pool, is_cached)
            eligible, available = nothing.index_fill(0, pooled, True), pool
        scores = layer.deviation("v", recipe.normalize)
    elif recipe.metric == "attn":
        scores = layer.question_attention()
    else:
        scores = layer.deviation(recipe.metric, recipe.normalize)
    scores = scores.float()
    if recipe.budget_mass < 1:
        keep = min(keep, mass_count(scores[eligible], recipe.budget_mass))
    num_forced = is_cached.shape[0] - num_cached
    return top_rows(scores, ~is_cached, num_forced, min(keep, available), eligible)
