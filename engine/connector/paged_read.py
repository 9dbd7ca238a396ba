"""Reading a request's K/V back out of vLLM's CPU paged cache, as vLLM's own prefill left it.

A first sighting is prefilled by vLLM itself and its chunks are copied out of the paged cache
afterwards (:mod:`engine.connector.capture`). How vLLM's CPU kernels lay a block out depends on
the instruction set they picked for the machine: the portable kernels keep values as written and
keys transposed, the AMX kernels pack pairs of dimensions for the tile unit. That layout is
vLLM's, not an interface, so it is learnt rather than assumed: ``BlockLayout.learn`` writes each
element's coordinates (K or V, token, head, dimension) through the layer's own cache update into
a scratch block, which says where every element lands, then checks random K/V in shuffled slots
read back exactly. Where that fails (a quantized cache, coordinates too large to write exactly)
the worker copies nothing out and first sightings are computed by the blend as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn

MAX_EXACT_COORDINATE = 256
"""Integers up to this survive a bf16 cache exactly (8 bits of mantissa)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StridedForm:
    """One half (keys or values) of a block as a strided view: the block's flat elements seen
    as [block_size // b, b, kv_heads, head_dim // c, c] from ``base``; tokens split in tiles of
    b, dimensions in packs of c (both 1 where nothing is tiled or packed)."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    base: int


@dataclass(frozen=True)
class BlockLayout:
    """Where each element of a block's K/V sits in the block, as flat offsets."""

    offsets: Tensor
    """[2 (keys, values), block_size, kv_heads, head_dim] int64 offsets into one block's
    elements (``kv_cache[block].flatten()``)."""
    strided: tuple[StridedForm, StridedForm] | None = None
    """The same as strided views, where the offsets have that form (every vLLM kernel's so
    far): a read is then a copy in memory order instead of a gather, about twice as fast."""

    @classmethod
    def learn(cls, layer: nn.Module, kv_cache: Tensor) -> BlockLayout | None:
        """The layout ``layer``'s cache update writes into a cache shaped like ``kv_cache``;
        None where it cannot be learnt or does not read back exactly."""
        _, num_kv_heads, block_size, width = kv_cache.shape
        shape = (block_size, num_kv_heads, width // 2)
        try:
            offsets = _locate(layer, kv_cache, shape)
            keys, values = (strided_form(half) for half in offsets)
            layout = cls(offsets, (keys, values) if keys and values else None)
            if not layout._reads_back(layer, kv_cache):
                raise ValueError("random K/V written through it do not read back exactly")
        except Exception as exc:
            log.warning("the paged cache's block layout cannot be learnt: %s", exc)
            return None
        return layout

    def read_rows(
        self, kv_cache: Tensor, block_ids: Tensor, start: int, end: int
    ) -> tuple[Tensor, Tensor]:
        """Keys and values [end - start, kv_heads, head_dim] of prompt positions start..end-1
        of a request whose blocks are ``block_ids`` (int64, in prompt order), copied out."""
        _, block_size, num_kv_heads, head_dim = self.offsets.shape
        first, last = start // block_size, -(-end // block_size)
        blocks = kv_cache[block_ids[first:last]].flatten(1)  # copies only these blocks
        count = blocks.shape[0]
        offset = start - first * block_size
        if self.strided is not None:
            keys, values = (
                blocks.as_strided((count, *form.sizes), (blocks.stride(0), *form.strides),
                                  form.base).reshape(count * block_size, num_kv_heads, head_dim)
                for form in self.strided
            )  # fmt: skip
            return keys[offset : offset + end - start], values[offset : offset + end - start]
        both = blocks[:, self.offsets.flatten()].view(count, 2, block_size, num_kv_heads, head_dim)
        both = both.transpose(0, 1).reshape(2, count * block_size, num_kv_heads, head_dim)
        rows = both[:, offset : offset + end - start]
        return rows[0].clone(), rows[1].clone()

    def _reads_back(self, layer: nn.Module, kv_cache: Tensor) -> bool:
        """Random rows written to shuffled slots of two scratch blocks read back exactly."""
        block_size, num_kv_heads, head_dim = self.offsets.shape[1:]
        scratch = kv_cache.new_zeros((2, *kv_cache.shape[1:]))
        rows = 2 * block_size
        generator = torch.Generator().manual_seed(0)
        keys, values = (
            torch.randn((rows, num_kv_heads, head_dim), generator=generator).to(kv_cache.dtype)
            for _ in range(2)
        )
        slots = torch.randperm(rows, generator=generator)
        layer.impl.do_kv_cache_update(layer, keys, values, scratch, slots)
        read_keys, read_values = self.read_rows(scratch, torch.arange(2), 0, rows)
        order = torch.argsort(slots)  # row i of the cache holds the row written to slot i
        return torch.equal(read_keys, keys[order]) and torch.equal(read_values, values[order])


def _locate(layer: nn.Module, kv_cache: Tensor, shape: tuple[int, int, int]) -> Tensor:
    """``BlockLayout.offsets``: each coordinate (1-based, so that an untouched element reads
    0) written as every element's value through the cache update, one coordinate at a time."""
    if max(shape) > MAX_EXACT_COORDINATE:
        raise ValueError(f"a block of {shape} has coordinates past {MAX_EXACT_COORDINATE}")
    block_size, num_kv_heads, head_dim = shape
    scratch = kv_cache.new_zeros((1, *kv_cache.shape[1:]))
    grids = torch.meshgrid(*(torch.arange(1, n + 1) for n in shape), indexing="ij")
    slots = torch.arange(block_size)
    ones = torch.ones(shape)
    found = []
    for key_part, value_part in [(ones, 2 * ones), *((grid, grid) for grid in grids)]:
        scratch.zero_()
        key, value = (part.to(kv_cache.dtype) for part in (key_part, value_part))
        layer.impl.do_kv_cache_update(layer, key, value, scratch, slots)
        found.append(scratch.flatten().long() - 1)
    if any(bool((coordinate < 0).any()) for coordinate in found):
        raise ValueError("the cache update left elements of a full block unwritten")
    half, token, head, dim = found
    where = ((half * block_size + token) * num_kv_heads + head) * head_dim + dim
    if not torch.equal(torch.sort(where).values, torch.arange(where.numel())):
        raise ValueError("the cache update does not place each element once")
    offsets = torch.empty_like(where)
    offsets[where] = torch.arange(where.numel())
    return offsets.view(2, *shape)


def strided_form(offsets: Tensor) -> StridedForm | None:
    """``offsets`` [block_size, kv_heads, head_dim] as a strided view, tokens in tiles and
    dimensions in packs of powers of two; None if no such view places every element."""
    block_size, num_kv_heads, head_dim = offsets.shape
    base = int(offsets[0, 0, 0])

    def step(*at: int) -> int:
        return int(offsets[at]) - base

    for tile in _powers_of_two_dividing(block_size):
        for pack in _powers_of_two_dividing(head_dim):
            sizes = (block_size // tile, tile, num_kv_heads, head_dim // pack, pack)
            strides = (
                step(tile, 0, 0) if tile < block_size else 0,
                step(1, 0, 0) if tile > 1 else 0,
                step(0, 1, 0) if num_kv_heads > 1 else 0,
                step(0, 0, pack) if pack < head_dim else 0,
                step(0, 0, 1) if pack > 1 else 0,
            )
            grids = torch.meshgrid(*(torch.arange(n) for n in sizes), indexing="ij")
            placed = base + sum(stride * grid for stride, grid in zip(strides, grids, strict=True))
            if torch.equal(placed.reshape(offsets.shape), offsets):
                return StridedForm(sizes, strides, base)
    return None


def _powers_of_two_dividing(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0]
