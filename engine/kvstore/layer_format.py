"""How one layer's K and V are laid out in an entry: raw, or quantized to 8 bits for slow tiers.

Chunk KV is large (12 KiB a token for a 0.5B model, 128 KiB for an 8B one), and the disk and
Redis tiers pay for every byte in space and transfer time. `INT8` halves a bf16 layer:

- K is quantized per channel (one scale per KV head and head dimension, over the chunk's tokens):
  keys have a few channels of much larger magnitude than the rest, and a per-token scale would
  flatten every other channel to a handful of levels (KIVI's observation).
- V is quantized per token (one scale per token and KV head, over the head dimension): values
  have no such outlier channels, and attention mixes them per token.

Both are symmetric (x = q * scale, q in [-127, 127]); scales are float32. Decoding gives the
entry's dtype back. Every size is fixed by the geometry, so a reader can seek to any layer.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch
from torch import Tensor

_LEVELS = 127.0
_SCALE_DTYPE = torch.float32


class LayerFormat(IntEnum):
    """Stored in each entry's header; a reader decodes whichever it finds."""

    RAW = 0
    """The tensors' own bytes (exact)."""
    INT8 = 1
    """8-bit K per channel and V per token, with float32 scales."""


def layer_nbytes(
    layer_format: LayerFormat, dtype: torch.dtype, tokens: int, heads: int, dim: int
) -> int:
    """Bytes of one encoded layer (K and V)."""
    elements = tokens * heads * dim
    if layer_format == LayerFormat.RAW:
        return 2 * elements * dtype.itemsize
    return 2 * elements + _SCALE_DTYPE.itemsize * (heads * dim + tokens * heads)


def _symmetric_int8(tensor: Tensor, reduce_dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """(q, scale) with tensor ~= q * scale; scale keeps `tensor`'s dims, reduced ones as 1."""
    wide = tensor.to(torch.float32)
    scale = wide.abs().amax(dim=reduce_dims, keepdim=True) / _LEVELS
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero slice stays 0
    quantized = torch.round(wide / scale).clamp_(-_LEVELS, _LEVELS).to(torch.int8)
    return quantized, scale.to(_SCALE_DTYPE)


def encode_layer(layer_format: LayerFormat, keys: Tensor, values: Tensor) -> list[np.ndarray]:
    """The byte buffers of one layer, in order; `keys`, `values` are [tokens, heads, dim]."""
    if layer_format == LayerFormat.RAW:
        tensors = [keys, values]
    else:
        key_q, key_scale = _symmetric_int8(keys, reduce_dims=(0,))  # scale [1, heads, dim]
        value_q, value_scale = _symmetric_int8(values, reduce_dims=(2,))  # [tokens, heads, 1]
        tensors = [key_q, value_q, key_scale, value_scale]
    return [tensor.contiguous().view(torch.uint8).numpy().reshape(-1) for tensor in tensors]


def decode_layer(
    layer_format: LayerFormat,
    raw: bytearray,
    dtype: torch.dtype,
    tokens: int,
    heads: int,
    dim: int,
) -> tuple[Tensor, Tensor]:
    """(k, v) in `dtype`, each [tokens, heads, dim], from one layer's verified bytes."""
    data = torch.frombuffer(raw, dtype=torch.uint8)
    if layer_format == LayerFormat.RAW:
        both = data.view(dtype).view(2, tokens, heads, dim)
        return both[0], both[1]
    elements = tokens * heads * dim
    quantized = data[: 2 * elements].view(torch.int8).view(2, tokens, heads, dim)
    scales = data[2 * elements :].clone().view(_SCALE_DTYPE)  # clone: aligned for float32
    key_scale = scales[: heads * dim].view(1, heads, dim)
    value_scale = scales[heads * dim :].view(tokens, heads, 1)
    keys = (quantized[0].to(torch.float32) * key_scale).to(dtype)
    values = (quantized[1].to(torch.float32) * value_scale).to(dtype)
    return keys, values
