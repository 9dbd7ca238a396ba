"""Choose the tokens to recompute before computing any of them: the question probes the cache.

Deviation-based selection (HKVD) must compute every chunk token fresh through the first layer
before it can rank them, which costs 1/L of a full prefill on top of the share recomputed and
caps the speed-up at about 1 / (1/L + ratio). Here only the tokens without a cache (the prefix,
chunk heads, the question) run through the first layers, attending to the chunks' reused K/V;
at the probe layer the question's attention ranks the cached tokens, and the chosen ones are then
computed from layer 0 on while every other chunk token keeps its cache in every layer.

The probe reads the chunks' first layers with ``keep`` (``PlacedChunks.layer``): the blend that
follows reads them again from there, and the rest as they stream in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.select import HeadSum, question_attention

if TYPE_CHECKING:
    from engine.blend.decoder import DecoderAdapter
    from engine.blend.placed import PlacedChunks


def probe_question(
    model: DecoderAdapter,
    token_ids: Tensor,
    cached: PlacedChunks,
    uncached: Tensor,
    question_rows: int,
    probe_layer: int,
    sum_heads: HeadSum,
) -> Tensor:
    """Per prompt position [num_tokens]: the attention the question (the last
    ``question_rows`` of the ``uncached`` positions, which ascend) pays to it at
    ``probe_layer`` when only the ``uncached`` positions are computed and every chunk token
    keeps its cached K/V. Reads layers 0..``probe_layer`` of ``cached``, next to read, with
    ``keep``."""
    if not 0 <= probe_layer < model.num_layers:
        raise ValueError(f"probe layer {probe_layer} is outside the model's {model.num_layers}")
    hidden = model.embed(token_ids[uncached])
    residual: Tensor | None = None
    for layer in range(probe_layer):
        q, k_fresh, v_fresh, residual = model.qkv(layer, hidden, residual, uncached)
        keys, values = cached.layer(layer, k_fresh, keep=True)
        keys[uncached], values[uncached] = k_fresh, v_fresh
        every = uncached.shape[0] == keys.shape[0]  # no chunk token cached: all computed
        attention = selective_attention(q, keys, values, uncached, model.scale, every)
        hidden, residual = model.finish(layer, attention.flatten(1), residual)
    q, k_fresh, _, _ = model.qkv(probe_layer, hidden, residual, uncached)
    keys, _ = cached.layer(probe_layer, k_fresh, keep=True)
    keys[uncached] = k_fresh
    asking = uncached.shape[0] - question_rows
    return question_attention(q[asking:], uncached[asking:], keys, model.scale, sum_heads)
