"""What the blend maths see of a model and of a stored chunk.

Kept apart from ``fuse`` so that the strategies it calls (``probe``) can name them without
importing the blended prefill that calls them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from torch import Tensor


class DecoderAdapter(Protocol):
    """The few module calls a blended prefill needs from a decoder-only model."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    scale: float

    def embed(self, token_ids: Tensor) -> Tensor: ...

    def qkv(
        self, layer: int, hidden: Tensor, residual: Tensor | None, positions: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Pre-attention half of a layer: (q [n,H,D], k [n,KV,D], v [n,KV,D], residual)."""
        ...

    def finish(self, layer: int, attention: Tensor, residual: Tensor) -> tuple[Tensor, Tensor]:
        """Post-attention half: o_proj, residual add, norm, MLP -> (hidden, residual)."""
        ...


@dataclass
class CachedChunk:
    """A stored chunk placed at [start, end) of the prompt; it was computed at `source_start`."""

    start: int
    end: int
    source_start: int
    layers: Iterator[tuple[Tensor, Tensor]]
