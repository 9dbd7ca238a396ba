"""Chunks computed behind a fixed prefix whose KV is kept, so only the chunk's tokens are computed.

Every missed chunk is stored as it would be computed right after the same fixed prefix (the
chunk prefix: with ``passages`` about 300 tokens, often longer than the chunk). Computing that
prefix again for every chunk tripled the work of storing a cold chunk; its KV depends on nothing
else, so it is computed once and the chunk's queries attend to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.decoder import DecoderAdapter
from engine.blend.fuse import LayerSink, blend_prefill
from engine.contract import Recipe


@dataclass(frozen=True)
class PrefixKV:
    """Every layer's (keys, values) of ``token_ids`` at positions 0..n-1, computed alone."""

    token_ids: tuple[int, ...]
    layers: tuple[tuple[Tensor, Tensor], ...]


def compute_prefix(model: DecoderAdapter, token_ids: Tensor) -> PrefixKV:
    layers: list[tuple[Tensor, Tensor]] = []

    def keep(_layer: int, keys: Tensor, values: Tensor) -> None:
        layers.append((keys.clone(), values.clone()))

    blend_prefill(model, token_ids, [], None, Recipe.exact(), keep)
    return PrefixKV(tuple(token_ids.tolist()), tuple(layers))


def prefill_behind(
    model: DecoderAdapter, prefix: PrefixKV, token_ids: Tensor, sink: LayerSink
) -> None:
    """The exact KV of ``token_ids`` placed right after ``prefix``: each layer's rows of
    ``token_ids`` alone go to ``sink``, as a prefill of the two together would give them."""
    start = len(prefix.token_ids)
    head = torch.tensor(prefix.token_ids, dtype=token_ids.dtype, device=token_ids.device)

    def attend(layer: int, q: Tensor, keys: Tensor, values: Tensor, positions: Tensor) -> Tensor:
        prefix_keys, prefix_values = prefix.layers[layer]
        keys[:start], values[:start] = prefix_keys, prefix_values  # this layer's own copies
        return selective_attention(q, keys, values, positions, model.scale)

    def keep(layer: int, keys: Tensor, values: Tensor) -> None:
        sink(layer, keys[start:], values[start:])

    ids = torch.cat([head, token_ids])
    blend_prefill(model, ids, [], None, Recipe.exact(), keep, attend, settled=start)
