"""Chunks computed behind a fixed prefix whose KV is kept, so only the chunks' tokens are computed.

Every missed chunk is stored as it would be computed right after the fixed chunk prefix (the
chunk prefix: with ``passages`` about 300 tokens, often longer than the chunk). Computing that
prefix again for every chunk tripled the work of storing a cold chunk; its KV depends on nothing
else, so it is computed once and every chunk's queries attend to it. The chunks of one request
pass the layers together: each layer's projections and MLP run once over all their tokens (one
large matmul instead of one per chunk), while each chunk attends only to the prefix and itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.decoder import DecoderAdapter

ChunkSink = Callable[[int, int, Tensor, Tensor], None]
"""(chunk index, layer, keys, values) of one chunk's tokens at one layer."""


@dataclass(frozen=True)
class PrefixKV:
    """Every layer's (keys, values) of ``token_ids`` at positions 0..n-1, computed alone."""

    token_ids: tuple[int, ...]
    layers: tuple[tuple[Tensor, Tensor], ...]


NO_PREFIX = PrefixKV((), ())


def compute_prefix(model: DecoderAdapter, token_ids: Tensor) -> PrefixKV:
    layers: list[tuple[Tensor, Tensor]] = []

    def keep(_chunk: int, _layer: int, keys: Tensor, values: Tensor) -> None:
        layers.append((keys.clone(), values.clone()))

    prefill_behind(model, NO_PREFIX, [token_ids], keep)
    return PrefixKV(tuple(token_ids.tolist()), tuple(layers))


@torch.inference_mode()
def prefill_behind(
    model: DecoderAdapter, prefix: PrefixKV, chunks: list[Tensor], sink: ChunkSink
) -> None:
    """The exact KV of each of ``chunks`` placed alone right after ``prefix`` (positions
    ``len(prefix)`` on), as a prefill of the prefix and that one chunk would give it."""
    start = len(prefix.token_ids)
    bounds, offset = [], 0
    for chunk in chunks:
        bounds.append((offset, offset + chunk.shape[0]))
        offset += chunk.shape[0]
    device = chunks[0].device
    positions = torch.cat([torch.arange(start, start + end - begin) for begin, end in bounds])
    positions = positions.to(device)
    hidden = model.embed(torch.cat(chunks))
    residual: Tensor | None = None
    for layer in range(model.num_layers):
        q, keys, values, residual = model.qkv(layer, hidden, residual, positions)
        for index, (begin, end) in enumerate(bounds):
            sink(index, layer, keys[begin:end], values[begin:end])
        if layer == model.num_layers - 1:
            return  # the last layer's KV is all that is wanted: no attention, no MLP
        outputs = []
        for begin, end in bounds:
            chunk_keys, chunk_values = keys[begin:end], values[begin:end]
            if prefix.layers:
                prefix_keys, prefix_values = prefix.layers[layer]
                chunk_keys = torch.cat([prefix_keys, chunk_keys])
                chunk_values = torch.cat([prefix_values, chunk_values])
            outputs.append(
                selective_attention(  # the chunk is the tail of the prefix and itself
                    q[begin:end], chunk_keys, chunk_values, positions[begin:end], model.scale, True
                )
            )
        hidden, residual = model.finish(layer, torch.cat(outputs).flatten(1), residual)
