"""Choose the tokens to recompute before computing any of them: the question probes the cache.

Deviation-based selection (HKVD) must compute every chunk token fresh through the first layer
before it can rank them, which costs 1/L of a full prefill on top of the share recomputed and
caps the speed-up at about 1 / (1/L + ratio). Here only the tokens without a cache (the prefix,
chunk heads, the question) run through the first layers, attending to the chunks' reused K/V;
at the probe layer the question's attention ranks the cached tokens, and the chosen ones are then
computed from layer 0 on while every other chunk token keeps its cache in every layer.

A probe needs each chunk's first layers twice (once to probe, once to blend): ``replayable``
keeps them, and the blend reads the rest of each chunk's layers as they stream in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import chain, islice
from typing import TYPE_CHECKING

from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.select import HeadSum, question_attention

if TYPE_CHECKING:
    from engine.blend.decoder import CachedChunk, DecoderAdapter

CachedLayer = Callable[[list["CachedChunk"], Tensor], tuple[Tensor, Tensor]]
"""(chunks, fresh keys like) -> every position's cached K and V of the chunks' next layer."""


def replayable(
    chunks: list[CachedChunk], num_layers: int
) -> tuple[list[CachedChunk], list[CachedChunk]]:
    """(chunks reading only their first ``num_layers`` layers, the same chunks reading all):
    the first layers are read once and kept for both."""
    probing, blending = [], []
    for chunk in chunks:
        first = list(islice(chunk.layers, num_layers))
        probing.append(replace(chunk, layers=iter(first)))
        blending.append(replace(chunk, layers=chain(first, chunk.layers)))
    return probing, blending


def probe_question(
    model: DecoderAdapter,
    token_ids: Tensor,
    chunks: list[CachedChunk],
    cached_layer: CachedLayer,
    uncached: Tensor,
    question_start: int,
    probe_layer: int,
    sum_heads: HeadSum,
) -> Tensor:
    """Per prompt position [num_tokens]: the attention the question pays to it at ``probe_layer``
    when only the ``uncached`` positions (ascending; the question among them) are computed and
    every chunk token keeps its cached K/V. ``chunks`` must yield ``probe_layer + 1`` layers."""
    if not 0 <= probe_layer < model.num_layers:
        raise ValueError(f"probe layer {probe_layer} is outside the model's {model.num_layers}")
    hidden = model.embed(token_ids[uncached])
    residual: Tensor | None = None
    asking = uncached >= question_start
    for layer in range(probe_layer):
        q, k_fresh, v_fresh, residual = model.qkv(layer, hidden, residual, uncached)
        keys, values = _fused(chunks, cached_layer, uncached, k_fresh, v_fresh)
        attention = selective_attention(q, keys, values, uncached, model.scale)
        hidden, residual = model.finish(layer, attention.flatten(1), residual)
    q, k_fresh, v_fresh, _ = model.qkv(probe_layer, hidden, residual, uncached)
    keys, _ = _fused(chunks, cached_layer, uncached, k_fresh, v_fresh)
    return question_attention(q[asking], uncached[asking], keys, model.scale, sum_heads)


def _fused(
    chunks: list[CachedChunk], cached_layer: CachedLayer, uncached: Tensor, k: Tensor, v: Tensor
) -> tuple[Tensor, Tensor]:
    keys, values = cached_layer(chunks, k)
    keys[uncached], values[uncached] = k, v
    return keys, values
