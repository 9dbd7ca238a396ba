"""Where each chunk of a blend job comes from: the chunk store (hits) or this computation.

A hit streams its cached layers into the blend; a stream that turns out unreadable midway
raises ``ChunkUnreadable`` so the worker can redo the job with that chunk as a miss.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from engine.blend.fuse import CachedChunk
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey


class ChunkUnreadable(RuntimeError):
    def __init__(self, key: ChunkKey) -> None:
        super().__init__(f"cached chunk {key} turned out corrupt while loading")
        self.key = key


@dataclass
class Capture:
    """Collects one span's fresh K/V, layer by layer, to store it as a chunk."""

    key: ChunkKey
    start: int
    end: int
    token_ids: list[int]
    keys: list[Tensor] = field(default_factory=list)
    values: list[Tensor] = field(default_factory=list)

    def entry(self) -> ChunkKV:
        return ChunkKV(torch.stack(self.keys), torch.stack(self.values), self.token_ids)


@dataclass
class Placement:
    """Where each chunk of a job comes from: the store (hits) or this computation (captures)."""

    hits: list[CachedChunk] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    keys: list[ChunkKey] = field(default_factory=list)
    """Every placed chunk's key, hit or captured, in prompt order."""
    rejected: int = 0


def cached_layers(stream: Any, key: ChunkKey) -> Iterator[tuple[Tensor, Tensor]]:
    try:
        for _, keys, values in stream:
            yield keys, values
    except CorruptEntry as exc:
        raise ChunkUnreadable(key) from exc
    finally:
        stream.close()
