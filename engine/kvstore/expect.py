"""What an entry must look like to be used for a chunk, checked before the store serves it.

A checksum only says the bytes are the ones that were written. An entry can be intact and still
wrong for its use: fewer tokens than the chunk, other token ids, another model's layer count or
dtype. Used as a hit, such an entry crashes the engine or silently changes the answer, so the
store compares every entry with the caller's `EntryExpectation` first and treats a mismatch as a
miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


class EntryLayout(Protocol):
    """The geometry an entry declares: `ChunkKV`, `EntryHeader` and `LayerStream` all have it."""

    @property
    def token_ids(self) -> Sequence[int]: ...

    @property
    def num_layers(self) -> int: ...

    @property
    def num_kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def dtype(self) -> torch.dtype: ...


@dataclass(frozen=True)
class EntryExpectation:
    """The chunk a caller is about to fill (its token ids) and the KV geometry of its model.

    Build it from the tokens of the span being blended and the running model's layer count, KV
    heads, head size and KV dtype; never from the entry itself.
    """

    token_ids: tuple[int, ...]
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_ids", tuple(int(token) for token in self.token_ids))
        if not self.token_ids:
            raise ValueError("an expected entry has at least one token")
        if min(self.num_layers, self.num_kv_heads, self.head_dim) <= 0:
            raise ValueError("num_layers, num_kv_heads and head_dim must be positive")

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def mismatch(self, found: EntryLayout) -> str | None:
        """Why `found` cannot serve this chunk, or None when it matches exactly."""
        fields = (
            ("dtype", found.dtype, self.dtype),
            ("layers", found.num_layers, self.num_layers),
            ("kv heads", found.num_kv_heads, self.num_kv_heads),
            ("head dim", found.head_dim, self.head_dim),
            ("tokens", len(found.token_ids), self.num_tokens),
        )
        for name, got, wanted in fields:
            if got != wanted:
                return f"{name} {got}, expected {wanted}"
        if tuple(found.token_ids) != self.token_ids:
            return "token ids differ from the chunk's"
        return None

    def layer_mismatch(self, position: int, index: int, keys: Tensor, values: Tensor) -> str | None:
        """Why a streamed layer, the `position`-th to arrive, cannot be used; None if it can."""
        if index != position:
            return f"layer {index} arrived where layer {position} was expected"
        shape = (self.num_tokens, self.num_kv_heads, self.head_dim)
        for name, tensor in (("k", keys), ("v", values)):
            if tuple(tensor.shape) != shape or tensor.dtype != self.dtype:
                return (
                    f"layer {index} {name} is {tuple(tensor.shape)} {tensor.dtype}, "
                    f"expected {shape} {self.dtype}"
                )
        return None
