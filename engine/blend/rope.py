"""RoPE re-rotation of cached keys by a position delta.

RoPE composes, R(a + b) = R(b) R(a), so a key cached at position p moves to p + d by rotating it
by d. Angles, cos/sin and the rotation itself are computed in fp32; the result keeps the input
dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from engine.blend.stream import upload

_PLAIN_TYPES = frozenset({"default"})
_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


class UnsupportedRope(ValueError):
    """The model's RoPE variant cannot be re-rotated here; blending must be switched off."""


@dataclass(frozen=True)
class RopeSpec:
    """Rotary embedding of one attention layer.

    `scaling` is the HF `rope_scaling` / `rope_parameters` dict (or None): plain ("default"),
    "linear" and "llama3" are supported, anything else raises `UnsupportedRope`.
    """

    head_dim: int
    rotary_dim: int
    base: float
    is_neox_style: bool
    scaling: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.rotary_dim <= 0 or self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
            raise ValueError(
                f"rotary_dim must be even and in (0, head_dim={self.head_dim}], "
                f"got {self.rotary_dim}"
            )
        if self.base <= 0:
            raise ValueError(f"RoPE base must be positive, got {self.base}")
        _scaling_type(self.scaling)


def _scaling_type(scaling: dict[str, Any] | None) -> str:
    """Return "default", "linear" or "llama3", raising `UnsupportedRope` otherwise."""
    if not scaling:
        return "default"
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if "mrope_section" in scaling:
        raise UnsupportedRope("multimodal RoPE (mrope) is not supported")
    if kind in _PLAIN_TYPES:
        return "default"
    if kind == "linear":
        if float(scaling.get("factor", 0.0)) <= 0:
            raise UnsupportedRope("linear RoPE scaling needs a positive 'factor'")
        return kind
    if kind == "llama3":
        missing = [key for key in _LLAMA3_KEYS if key not in scaling]
        if missing:
            raise UnsupportedRope(f"llama3 RoPE scaling lacks {missing}")
        if float(scaling["high_freq_factor"]) <= float(scaling["low_freq_factor"]):
            raise UnsupportedRope("llama3 RoPE scaling needs high_freq_factor > low_freq_factor")
        return kind
    raise UnsupportedRope(f"RoPE scaling type {kind!r} is not supported")


def _llama3_scale(freq: Tensor, scaling: dict[str, Any]) -> Tensor:
    """Llama-3 frequency scaling: long wavelengths / factor, short kept, smooth blend between."""
    factor = float(scaling["factor"])
    low = float(scaling["low_freq_factor"])
    high = float(scaling["high_freq_factor"])
    original = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / freq
    smooth = ((original / wavelen - low) / (high - low)).clamp(0.0, 1.0)
    blended = (1 - smooth) * freq / factor + smooth * freq
    scaled = torch.where(wavelen > original / low, freq / factor, blended)
    return torch.where(wavelen < original / high, freq, scaled)


def inv_freq(spec: RopeSpec) -> Tensor:
    """Inverse frequencies [rotary_dim // 2] in fp32, scaling applied."""
    exponents = torch.arange(0, spec.rotary_dim, 2, dtype=torch.float64) / spec.rotary_dim
    freq = spec.base**-exponents
    scaling = spec.scaling or {}
    kind = _scaling_type(scaling)
    if kind == "linear":
        freq = freq / float(scaling["factor"])
    elif kind == "llama3":
        freq = _llama3_scale(freq, scaling)
    return freq.float()


@dataclass(frozen=True)
class Rotation:
    """The cos/sin of a move by per-token deltas. Every layer's keys move by the same deltas, so
    a blend computes this once per request and applies it to each layer."""

    cos: Tensor
    """[num_tokens or 1, rotary_dim // 2], fp32; sin alike."""
    sin: Tensor
    spec: RopeSpec

    @property
    def num_tokens(self) -> int:
        return self.cos.shape[0]


def rotation(delta: int | Tensor, spec: RopeSpec, device: torch.device | None = None) -> Rotation:
    """The rotation moving keys by ``delta``: an int (every token alike) or an integer tensor
    [num_tokens]; it may be negative."""
    device = torch.device("cpu") if device is None else torch.device(device)
    freq = upload(inv_freq(spec), device)  # made on the host: sent without waiting for a GPU
    if isinstance(delta, Tensor):
        if delta.is_floating_point() or delta.dim() != 1:
            raise ValueError(
                f"delta must be a 1-d integer tensor, got {delta.dtype} {tuple(delta.shape)}"
            )
        steps = delta.to(device=device, dtype=torch.float32)
    else:
        steps = upload(torch.tensor([float(delta)]), device)
    angles = steps[:, None] * freq[None, :]
    return Rotation(angles.cos(), angles.sin(), spec)


def rotate(x: Tensor, move: Rotation) -> Tensor:
    """Rotate x [num_tokens, ..., head_dim] by ``move`` (of num_tokens or 1 rows). Returns a new
    tensor in x's dtype; columns past ``rotary_dim`` are copied unchanged."""
    spec = move.spec
    if x.shape[-1] != spec.head_dim:
        raise ValueError(f"last dimension {x.shape[-1]} != head_dim {spec.head_dim}")
    if not x.is_floating_point():
        raise TypeError(f"expected a floating point tensor, got {x.dtype}")
    if move.num_tokens not in (1, x.shape[0]):
        raise ValueError(f"a rotation of {move.num_tokens} tokens cannot move {x.shape[0]}")
    broadcast = (move.num_tokens, *([1] * (x.dim() - 2)), move.cos.shape[1])
    cos, sin = move.cos.reshape(broadcast), move.sin.reshape(broadcast)
    rot = x[..., : spec.rotary_dim].float()
    if spec.is_neox_style:
        first, second = rot.chunk(2, dim=-1)
    else:
        first, second = rot[..., 0::2], rot[..., 1::2]
    out_first = first * cos - second * sin
    out_second = second * cos + first * sin
    if spec.is_neox_style:
        rotated = torch.cat((out_first, out_second), dim=-1)
    else:
        rotated = torch.stack((out_first, out_second), dim=-1).flatten(-2)
    if spec.rotary_dim == spec.head_dim:
        return rotated.to(x.dtype)
    return torch.cat((rotated.to(x.dtype), x[..., spec.rotary_dim :]), dim=-1)


def rotate_keys(keys: Tensor, delta: int | Tensor, spec: RopeSpec) -> Tensor:
    """Move keys [num_tokens, num_kv_heads, head_dim] by `delta` positions.

    `delta` is an int or a per-token integer tensor [num_tokens]; it may be negative. Returns a
    new tensor in the input dtype; columns past `rotary_dim` are copied unchanged.
    """
    if isinstance(delta, Tensor) and delta.shape != (keys.shape[0],):
        raise ValueError(
            f"delta must be an integer tensor of shape ({keys.shape[0]},), "
            f"got {delta.dtype} {tuple(delta.shape)}"
        )
    return rotate(keys, rotation(delta, spec, keys.device))


def apply_rope(x: Tensor, positions: Tensor, spec: RopeSpec) -> Tensor:
    """Apply RoPE to un-rotated x [num_tokens, ..., head_dim] at absolute positions [num_tokens].

    Rotating from position 0 to p is a move by p, so this is `rotate_keys` with delta=positions;
    it is the reference that re-rotation must agree with.
    """
    return rotate_keys(x, positions, spec)
