"""The blended prefill: reuse cached chunk KV anywhere in the prompt, recompute a few tokens.

One pass over the decoder layers. Layer by layer every cached chunk's K/V, re-rotated to its new
position (``placed.PlacedChunks``), is overwritten at the tokens still "active", which are
computed fresh, and at check layers the active set narrows to the tokens whose fresh K/V deviate
most from the cache (HKVD selection, gradually filtered; ``check.py`` has the other strategies).
Tokens with no cache (prefix, gaps, missed chunks) are always active. Active queries attend to
the fused K/V with an exact causal mask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.check import CheckLayer, rows_to_keep
from engine.blend.decoder import CachedChunk, DecoderAdapter
from engine.blend.layout import Layout, Prompt
from engine.blend.placed import PlacedChunks
from engine.blend.probe import probe_question
from engine.blend.select import (
    HeadSum,
    fraction_count,
    gradual_schedule,
    keep_count,
    local_heads_only,
    top_rows,
)
from engine.contract import QUESTION_METRICS, Recipe

__all__ = [
    "Attend",
    "BlendResult",
    "CachedChunk",
    "LayerHooks",
    "LayerSink",
    "PlacedChunks",
    "Prompt",
    "blend_prefill",
]


@dataclass(frozen=True)
class BlendResult:
    num_tokens: int
    recomputed_positions: Tensor
    """Positions computed fresh through the last layer (the rest kept their cached KV)."""

    def recomputed_from(self, start: int = 0) -> int:
        return int((self.recomputed_positions >= start).sum())

    def reused_from(self, start: int = 0) -> int:
        return self.num_tokens - start - self.recomputed_from(start)

    @property
    def recomputed_tokens(self) -> int:
        return self.recomputed_from()

    @property
    def reused_tokens(self) -> int:
        return self.reused_from()


LayerSink = Callable[[int, Tensor, Tensor], None]
Attend = Callable[[int, Tensor, Tensor, Tensor, Tensor], Tensor]
"""(layer, q, fused k, fused v, query positions) -> attention output; runs after the sink."""


@dataclass(frozen=True)
class LayerHooks:
    """What becomes of each layer's fused K/V."""

    sink: LayerSink
    """Receives (layer, fused keys, fused values) [num_tokens, kv_heads, head_dim]; rows before
    the prompt's ``settled`` are meaningless."""
    attend: Attend | None = None
    """Computes the active queries' attention after the sink (default: exact-mask SDPA over
    the fused K/V), so it may read them back from where the sink wrote them. Needed when
    positions are settled."""


@torch.inference_mode()
def blend_prefill(
    model: DecoderAdapter,
    prompt: Prompt,
    cached: PlacedChunks | None,
    recipe: Recipe,
    hooks: LayerHooks,
    sum_heads: HeadSum = local_heads_only,
) -> BlendResult:
    """Compute the fused K/V of every layer of ``prompt`` into ``hooks.sink``.

    ``cached`` (None: no cached chunk, every token is computed) gives each layer's cached K/V of
    the chunks; it is built for this prompt and read here once, layer by layer. ``sum_heads``
    completes selection scores over the heads other tensor-parallel ranks hold.
    """
    token_ids, settled = prompt.token_ids, prompt.settled
    num_tokens = prompt.num_tokens
    if cached is None:
        cached = PlacedChunks([], None, num_tokens, token_ids.device)
    if cached.num_tokens != num_tokens:
        raise ValueError(f"chunks placed in {cached.num_tokens} tokens, a prompt of {num_tokens}")
    if settled and hooks.attend is None:
        raise ValueError("settled positions need an attend that reads them from the cache")
    layout = Layout.of(prompt, cached.spans, recipe.chunk_head_tokens)
    schedule = gradual_schedule(recipe.ratio, recipe.check_layers)
    if not layout.num_cached:
        schedule = None  # every position is computed: no check has anything to narrow
    if recipe.metric in QUESTION_METRICS and not layout.question_rows:
        recipe = replace(recipe, metric="v")  # nothing after the chunks is blended here
    active = layout.forced if recipe.ratio <= 0 else layout.positions
    if recipe.metric == "probe" and schedule is not None:
        if cached:  # else every token is computed: nothing to choose
            active = _choose_by_probe(model, prompt, cached, layout, recipe, sum_heads)
        schedule = None  # the chosen tokens are computed in every layer, no check narrows them

    hidden = model.embed(token_ids[active])
    residual: Tensor | None = None
    for layer in range(model.num_layers):
        q, k_fresh, v_fresh, residual = model.qkv(layer, hidden, residual, active)
        num_active = active.shape[0]  # a shape: known on the host, nothing is read back
        keep = None if schedule is None else keep_count(schedule, layer, layout.chunk_tokens)
        if not cached and num_active == num_tokens:  # every token, nothing cached: no copies
            k_fused, v_fused = k_fresh, v_fresh
        else:
            k_fused, v_fused = cached.layer(layer, k_fresh)
        kept = (k_fused[active], v_fused[active]) if keep is not None else None
        if k_fused is not k_fresh:
            k_fused[active], v_fused[active] = k_fresh, v_fresh
        if keep is not None:
            assert kept is not None
            check = CheckLayer(
                q, active, (k_fresh, v_fresh), kept, k_fused, layout.question_rows, model.scale,
                sum_heads
            )  # fmt: skip
            count, num_cached = max(0, keep - layout.head_tokens), num_active - layout.num_forced
            rows = rows_to_keep(check, layout.cached[active], count, recipe, num_cached)
            q, residual, active = q[rows], residual[rows], active[rows]

        hooks.sink(layer, k_fused, v_fused)
        if hooks.attend is None:  # no position is settled: all computed is the whole prompt
            every = active.shape[0] == num_tokens
            attention = selective_attention(q, k_fused, v_fused, active, model.scale, every)
        else:
            attention = hooks.attend(layer, q, k_fused, v_fused, active)
        hidden, residual = model.finish(layer, attention.flatten(1), residual)

    return BlendResult(num_tokens, active)


def _choose_by_probe(
    model: DecoderAdapter,
    prompt: Prompt,
    cached: PlacedChunks,
    layout: Layout,
    recipe: Recipe,
    sum_heads: HeadSum,
) -> Tensor:
    """The positions to compute in every layer: the uncached ones and the cached ones the
    question's probe attends to most, as many as the recipe's ratio leaves after the heads.
    The probe reads the first layers of ``cached`` with ``keep``, for the blend to read again."""
    keep = max(0, fraction_count(recipe.ratio, layout.chunk_tokens) - layout.head_tokens)
    probe_layer = recipe.check_layers[0][0] if recipe.check_layers else 1
    scores = probe_question(
        model, prompt.token_ids, cached, layout.forced, layout.question_rows, probe_layer,
        sum_heads
    )  # fmt: skip
    settled = prompt.settled
    cached_rows = layout.cached[settled:]
    count = min(keep, layout.num_cached)
    rows = top_rows(scores[settled:], ~cached_rows, layout.num_forced, count, cached_rows)
    return rows + settled
