"""How one layer's K and V are laid out in an entry: raw, losslessly coded, or 8-bit.

Chunk KV is large (12 KiB a token for a 0.5B model, 128 KiB for an 8B one), and the disk and
Redis tiers pay for every byte in space and transfer time.

`LOSSLESS` keeps every bit (ZipNN's observation): the most significant byte of a bf16 or fp16
element (sign and exponent) takes a few dozen values, the others (mantissa) look random. So the
elements are split into byte planes; the top plane is zstd-coded channel by channel (a channel's
exponents are alike) and the rest are stored as they are: 0.68x of bf16, decoded at about
1 GB/s. A layer's size then depends on its values; the entry's layer table records it.

`INT8` halves a bf16 layer:

- K is quantized per channel (one scale per KV head and head dimension, over the chunk's tokens):
  keys have a few channels of much larger magnitude than the rest, and a per-token scale would
  flatten every other channel to a handful of levels (KIVI's observation).
- V is quantized per token (one scale per token and KV head, over the head dimension): values
  have no such outlier channels, and attention mixes them per token.

Both are symmetric (x = q * scale, q in [-127, 127]); scales are float32. Decoding gives the
entry's dtype back. Its sizes are fixed by the geometry, like `RAW`'s.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch
from torch import Tensor

_LEVELS = 127.0
_SCALE_DTYPE = torch.float32
_ZSTD_LEVEL = 1
"""Level 1: as small as the higher levels on these planes (within 1%), and 3x faster to write."""


class LayerFormat(IntEnum):
    """Stored in each entry's header; a reader decodes whichever it finds."""

    RAW = 0
    """The tensors' own bytes (exact)."""
    INT8 = 1
    """8-bit K per channel and V per token, with float32 scales."""
    LOSSLESS = 2
    """Exact: the top byte plane zstd-coded per channel, the other bytes as they are."""


def has_fixed_size(layer_format: LayerFormat) -> bool:
    """Whether every layer's size follows from the geometry (else from the entry's table)."""
    return layer_format != LayerFormat.LOSSLESS


def layer_nbytes(
    layer_format: LayerFormat, dtype: torch.dtype, tokens: int, heads: int, dim: int
) -> int:
    """Bytes of one encoded layer (K and V); for `LOSSLESS`, the bytes before coding, about the
    most it can take (an incompressible plane grows by a few bytes of framing)."""
    elements = tokens * heads * dim
    if layer_format != LayerFormat.INT8:
        return 2 * elements * dtype.itemsize
    return 2 * elements + _SCALE_DTYPE.itemsize * (heads * dim + tokens * heads)


def _symmetric_int8(tensor: Tensor, reduce_dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """(q, scale) with tensor ~= q * scale; scale keeps `tensor`'s dims, reduced ones as 1."""
    wide = tensor.to(torch.float32)
    scale = wide.abs().amax(dim=reduce_dims, keepdim=True) / _LEVELS
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero slice stays 0
    quantized = torch.round(wide / scale).clamp_(-_LEVELS, _LEVELS).to(torch.int8)
    return quantized, scale.to(_SCALE_DTYPE)


def _byte_planes(keys: Tensor, values: Tensor) -> list[np.ndarray]:
    """[low planes as they are, zstd frame of the top plane in channel-major order]."""
    import zstandard  # here, not above: raw entries and the memory tier need torch alone

    tokens, heads, dim = keys.shape
    size = keys.dtype.itemsize
    both = torch.stack((keys, values)).view(torch.uint8).numpy()
    planes = both.reshape(2, tokens, heads * dim, size)  # little-endian: the top byte is last
    low = np.ascontiguousarray(planes[..., :-1]).reshape(-1)
    top = np.ascontiguousarray(planes[..., -1].transpose(0, 2, 1))
    frame = zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(top)
    return [low, np.frombuffer(frame, dtype=np.uint8)]


def _joined_planes(raw: bytearray, dtype: torch.dtype, tokens: int, heads: int, dim: int) -> Tensor:
    """K and V stacked, [2, tokens, heads, dim], from `_byte_planes`' bytes; ValueError if the
    frame does not decode to exactly one top plane."""
    import zstandard

    size, channels = dtype.itemsize, heads * dim
    low_nbytes = 2 * tokens * channels * (size - 1)
    top_nbytes = 2 * tokens * channels
    try:
        top = zstandard.ZstdDecompressor().decompress(
            memoryview(raw)[low_nbytes:], max_output_size=top_nbytes
        )
    except zstandard.ZstdError as error:
        raise ValueError(f"undecodable top byte plane: {error}") from error
    if len(top) != top_nbytes:
        raise ValueError(f"top byte plane of {len(top)} bytes, expected {top_nbytes}")
    planes = np.empty((2, tokens, channels, size), dtype=np.uint8)
    planes[..., :-1] = np.frombuffer(raw, np.uint8, low_nbytes).reshape(2, tokens, channels, -1)
    planes[..., -1] = np.frombuffer(top, np.uint8).reshape(2, channels, tokens).transpose(0, 2, 1)
    return torch.from_numpy(planes).view(dtype).view(2, tokens, heads, dim)


def encode_layer(layer_format: LayerFormat, keys: Tensor, values: Tensor) -> list[np.ndarray]:
    """The byte buffers of one layer, in order; `keys`, `values` are [tokens, heads, dim]."""
    if layer_format == LayerFormat.RAW:
        tensors = [keys, values]
    elif layer_format == LayerFormat.LOSSLESS:
        return _byte_planes(keys, values)
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
    if layer_format == LayerFormat.LOSSLESS:
        both = _joined_planes(raw, dtype, tokens, heads, dim)
        return both[0], both[1]
    elements = tokens * heads * dim
    quantized = data[: 2 * elements].view(torch.int8).view(2, tokens, heads, dim)
    scales = data[2 * elements :].clone().view(_SCALE_DTYPE)  # clone: aligned for float32
    key_scale = scales[: heads * dim].view(1, heads, dim)
    value_scale = scales[heads * dim :].view(tokens, heads, 1)
    keys = (quantized[0].to(torch.float32) * key_scale).to(dtype)
    values = (quantized[1].to(torch.float32) * value_scale).to(dtype)
    return keys, values
