"""Small random chunk-KV entries shared by the chunk store tests."""

from __future__ import annotations

import torch

from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey


def make_entry(seed: int, layers: int = 3) -> ChunkKV:
    gen = torch.Generator().manual_seed(seed)
    shape = (layers, 4, 2, 8)
    keys = torch.randn(shape, generator=gen).to(torch.bfloat16)
    values = torch.randn(shape, generator=gen).to(torch.bfloat16)
    return ChunkKV(keys, values, list(range(seed, seed + 4)))


def key_of(entry: ChunkKV) -> ChunkKey:
    return ChunkKey.for_chunk("test-model", entry.token_ids)


def same(a: ChunkKV | None, b: ChunkKV) -> bool:
    return (
        a is not None
        and torch.equal(a.keys, b.keys)
        and torch.equal(a.values, b.values)
        and a.token_ids == b.token_ids
    )
