"""Reading a request's K/V back out of vLLM's CPU paged cache, as vLLM's own prefill left it.

A first sighting is prefilled by vLLM itself and its chunks are copied out of the paged cache
afterwards (:mod:`engine.connector.capture`). vLLM's CPU kernels keep a block's values as written
([tokens, head_dim] per KV head) and its keys transposed ([head_dim, tokens]) so that a query
reads a key dimension across the block's tokens contiguously. That layout is vLLM's, not an
interface: ``reads_back`` writes random K/V through the layer's own cache update into a scratch
cache and checks that ``read_rows`` returns them exactly, and the worker copies chunks out of
the cache only where it does (elsewhere first sightings are computed by the blend as before).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def read_rows(kv_cache: Tensor, block_ids: Tensor, start: int, end: int) -> tuple[Tensor, Tensor]:
    """Keys and values [end - start, kv_heads, head_dim] of prompt positions start..end-1 of a
    request whose blocks are ``block_ids`` (int64, in prompt order), copied out of the cache."""
    num_blocks, num_kv_heads, block_size, _ = kv_cache.shape
    key_cache, value_cache = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, -1).chunk(
        2, dim=2
    )
    head_dim = key_cache.shape[-1]
    first, last = start // block_size, -(-end // block_size)
    blocks = block_ids[first:last]
    count = blocks.numel()
    keys = key_cache[blocks].reshape(count, num_kv_heads, head_dim, block_size)
    keys = keys.permute(0, 3, 1, 2).reshape(count * block_size, num_kv_heads, head_dim)
    values = value_cache[blocks].permute(0, 2, 1, 3).reshape(count * block_size, num_kv_heads, -1)
    offset = start - first * block_size
    rows = slice(offset, offset + end - start)
    return keys[rows].clone(), values[rows].clone()


def reads_back(layer: nn.Module, kv_cache: Tensor) -> bool:
    """Whether ``read_rows`` returns exactly what ``layer``'s cache update writes into a cache
    shaped like ``kv_cache`` (two scratch blocks; random rows in shuffled slots)."""
    _, num_kv_heads, block_size, _ = kv_cache.shape
    scratch = torch.zeros((2, *kv_cache.shape[1:]), dtype=kv_cache.dtype, device=kv_cache.device)
    head_dim = scratch.shape[-1] // 2
    rows = 2 * block_size
    generator = torch.Generator().manual_seed(0)
    shape = (rows, num_kv_heads, head_dim)
    keys = torch.randn(shape, generator=generator).to(kv_cache.dtype)
    values = torch.randn(shape, generator=generator).to(kv_cache.dtype)
    slots = torch.randperm(rows, generator=generator)
    try:
        layer.impl.do_kv_cache_update(layer, keys, values, scratch, slots)
        read_keys, read_values = read_rows(scratch, torch.arange(2), 0, rows)
    except Exception:
        return False
    order = torch.argsort(slots)  # row i of the cache holds the row written to slot i
    return torch.equal(read_keys, keys[order]) and torch.equal(read_values, values[order])
