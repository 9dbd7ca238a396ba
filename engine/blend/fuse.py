"""The blended prefill: reuse cached chunk KV anywhere in the prompt, recompute a few tokens.

One pass over the decoder layers. Layer by layer every cached chunk's K/V is re-rotated to its
new position, the tokens still "active" are computed fresh and overwrite their cached rows, and at
check layers the active set narrows to the tokens whose fresh K/V deviate most from the cache
(HKVD selection, gradually filtered; ``check.py`` has the other strategies). Tokens with no cache
(prefix, gaps, missed chunks) are always active. Active queries attend to the fused K/V with an
exact causal mask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.check import CheckLayer, rows_to_keep
from engine.blend.decoder import CachedChunk, DecoderAdapter
from engine.blend.probe import probe_question, replayable
from engine.blend.rope import RopeSpec, Rotation, rotate, rotation
from engine.blend.select import (
    HeadSum,
    fraction_count,
    gradual_schedule,
    keep_count,
    local_heads_only,
    select_top,
)
from engine.contract import QUESTION_METRICS, Recipe


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


@torch.inference_mode()
def blend_prefill(
    model: DecoderAdapter,
    token_ids: Tensor,
    chunks: list[CachedChunk],
    rope: RopeSpec | None,
    recipe: Recipe,
    sink: LayerSink,
    attend: Attend | None = None,
    question_start: int | None = None,
    settled: int = 0,
    sum_heads: HeadSum = local_heads_only,
) -> BlendResult:
    """Compute the fused K/V of every layer for ``token_ids`` (positions 0..n-1) into ``sink``.

    ``rope`` re-rotates the cached keys; it may be None only when ``chunks`` is empty.
    ``sink`` receives each layer's fused K/V before ``attend`` (default: exact-mask SDPA over
    them) computes the active queries' attention, so an ``attend`` may read them back.
    ``question_start`` (default: the end of the last cached chunk) is where the tokens whose
    attention the "attn" and "qv" metrics measure begin. Positions before ``settled`` already
    hold their final K/V where ``attend`` reads (vLLM's prefix cache): they are neither computed
    nor selected, and their rows of the fused K/V given to ``sink`` are meaningless. ``sum_heads``
    completes selection scores over the heads other tensor-parallel ranks hold.
    """
    if chunks and rope is None:
        raise ValueError("cached chunks need a RoPE spec to be moved to their new positions")
    if settled and attend is None:
        raise ValueError("settled positions need an attend that reads them from the cache")
    num_tokens = token_ids.shape[0]
    device = token_ids.device
    positions = torch.arange(settled, num_tokens, device=device)
    cached = torch.zeros(num_tokens, dtype=torch.bool, device=device)
    in_chunks = torch.zeros_like(cached)
    for chunk in chunks:
        in_chunks[chunk.start : chunk.end] = True
        cached[chunk.start + recipe.chunk_head_tokens : chunk.end] = True
    in_chunks[:settled] = False
    if cached[settled:].all():
        cached[-1] = False  # one exact token keeps every layer's active set non-empty
    forced = positions[~cached[settled:]]
    # The ratio is a share of all chunk tokens; the always-recomputed chunk heads count toward it.
    chunk_tokens, head_tokens = int(in_chunks.sum()), int((in_chunks & ~cached).sum())
    if question_start is None:
        question_start = max((chunk.end for chunk in chunks), default=0)
    schedule = gradual_schedule(recipe.ratio, recipe.check_layers)
    if recipe.metric in QUESTION_METRICS and question_start >= num_tokens:
        # nothing after the chunks is blended here, so no question to ask
        recipe = replace(recipe, metric="v")
    active = forced if recipe.ratio <= 0 else positions
    move = _chunk_rotation(chunks, rope, device)
    if recipe.metric == "probe" and schedule is not None:
        if chunks:  # else every token is computed: nothing to choose
            keep = max(0, fraction_count(recipe.ratio, chunk_tokens) - head_tokens)
            probe_layer = recipe.check_layers[0][0] if recipe.check_layers else 1
            chunks, active = _choose_by_probe(
                model, token_ids, chunks, move, forced, cached, keep, question_start,
                probe_layer, sum_heads
            )  # fmt: skip
        schedule = None  # the chosen tokens are computed in every layer, no check narrows them

    hidden = model.embed(token_ids[active])
    residual: Tensor | None = None
    for layer in range(model.num_layers):
        q, k_fresh, v_fresh, residual = model.qkv(layer, hidden, residual, active)
        k_cached, v_cached = _cached_layer(chunks, num_tokens, k_fresh, move)
        k_fused, v_fused = k_cached.clone(), v_cached.clone()
        k_fused[active], v_fused[active] = k_fresh, v_fresh

        keep = None if schedule is None else keep_count(schedule, layer, chunk_tokens)
        if keep is not None:
            check = CheckLayer(
                q, active, (k_fresh, v_fresh), (k_cached[active], v_cached[active]),
                k_fused, question_start, model.scale, sum_heads
            )  # fmt: skip
            rows = rows_to_keep(check, cached[active], max(0, keep - head_tokens), recipe)
            q, residual, active = q[rows], residual[rows], active[rows]

        sink(layer, k_fused, v_fused)
        if attend is None:
            attention = selective_attention(q, k_fused, v_fused, active, model.scale)
        else:
            attention = attend(layer, q, k_fused, v_fused, active)
        hidden, residual = model.finish(layer, attention.flatten(1), residual)

    return BlendResult(num_tokens, active)


def _choose_by_probe(
    model: DecoderAdapter,
    token_ids: Tensor,
    chunks: list[CachedChunk],
    move: Rotation | None,
    forced: Tensor,
    cached: Tensor,
    keep: int,
    question_start: int,
    probe_layer: int,
    sum_heads: HeadSum,
) -> tuple[list[CachedChunk], Tensor]:
    """(the chunks, ready to blend from layer 0; the positions to compute in every layer): the
    uncached ones and the ``keep`` cached ones the question's probe attends to most."""
    probing, blending = replayable(chunks, probe_layer + 1)
    num_tokens = token_ids.shape[0]

    def cached_layer(layer_chunks: list[CachedChunk], like: Tensor) -> tuple[Tensor, Tensor]:
        return _cached_layer(layer_chunks, num_tokens, like, move)

    scores = probe_question(
        model, token_ids, probing, cached_layer, forced, question_start, probe_layer, sum_heads
    )
    candidates = cached.nonzero().flatten()
    return blending, select_top(scores, candidates, keep, forced)


def _chunk_rotation(
    chunks: list[CachedChunk], rope: RopeSpec | None, device: torch.device
) -> Rotation | None:
    """Every cached chunk token's move from where it was computed to its place, in chunk order:
    the same for every layer, so computed once."""
    if not chunks:
        return None
    assert rope is not None
    deltas = [
        torch.full((chunk.end - chunk.start,), chunk.start - chunk.source_start) for chunk in chunks
    ]
    return rotation(torch.cat(deltas).to(device), rope, device)


def _cached_layer(
    chunks: list[CachedChunk], num_tokens: int, like: Tensor, move: Rotation | None
) -> tuple[Tensor, Tensor]:
    """The next layer of every chunk, keys moved by ``move``, at their places in the prompt."""
    shape = (num_tokens, *like.shape[1:])
    keys = torch.zeros(shape, dtype=like.dtype, device=like.device)
    values = torch.zeros_like(keys)
    layer = [next(chunk.layers) for chunk in chunks]
    if not layer:
        return keys, values
    assert move is not None
    moved = rotate(torch.cat([k for k, _ in layer]).to(like.device), move).to(like.dtype)
    offset = 0
    for chunk, (_, v) in zip(chunks, layer, strict=True):
        length = chunk.end - chunk.start
        keys[chunk.start : chunk.end] = moved[offset : offset + length]
        values[chunk.start : chunk.end] = v.to(device=like.device, dtype=like.dtype)
        offset += length
    return keys, values
