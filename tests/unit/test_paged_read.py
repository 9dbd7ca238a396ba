"""Chunk K/V copied out of vLLM's CPU paged cache are the rows vLLM's own cache update wrote."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.connector.paged_read import read_rows, reads_back

KV_HEADS, DIM = 2, 64


def cpu_layer(dtype: torch.dtype, block_size: int) -> SimpleNamespace:
    """An attention layer whose cache update is vLLM's CPU backend's own."""
    pytest.importorskip("vllm._custom_ops")
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackendImpl, _get_attn_isa

    state = SimpleNamespace(attn_type=AttentionType.DECODER, kv_cache_dtype="auto")
    layer = SimpleNamespace(
        isa=_get_attn_isa(dtype, block_size, DIM, "auto"), _k_scale_float=1.0, _v_scale_float=1.0
    )

    def update(layer, key, value, kv_cache, slots) -> None:
        CPUAttentionBackendImpl.do_kv_cache_update(state, layer, key, value, kv_cache, slots)

    layer.impl = SimpleNamespace(do_kv_cache_update=update)
    return layer


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_a_span_reads_back_as_written_across_scattered_blocks(
    dtype: torch.dtype, block_size: int
) -> None:
    layer = cpu_layer(dtype, block_size)
    cache = torch.zeros(9, KV_HEADS, block_size, 2 * DIM, dtype=dtype)
    assert reads_back(layer, cache)
    num_tokens = 3 * block_size + 5
    block_ids = torch.tensor([7, 2, 5, 0])  # the request's blocks, in prompt order
    positions = torch.arange(num_tokens)
    slots = block_ids[positions // block_size] * block_size + positions % block_size
    keys = torch.randn(num_tokens, KV_HEADS, DIM).to(dtype)
    values = torch.randn(num_tokens, KV_HEADS, DIM).to(dtype)
    layer.impl.do_kv_cache_update(layer, keys, values, cache, slots)
    start, end = block_size - 3, 3 * block_size + 2  # a chunk straddling four blocks
    read_keys, read_values = read_rows(cache, block_ids, start, end)
    assert torch.equal(read_keys, keys[start:end]) and torch.equal(read_values, values[start:end])


def test_a_cache_laid_out_otherwise_is_not_read() -> None:
    """A cache update that keeps keys untransposed: the worker leaves such a cache alone."""

    def plain(_layer, key, value, kv_cache, slots) -> None:
        blocks, heads, size, _ = kv_cache.shape
        key_cache, value_cache = kv_cache.view(blocks, heads, 2 * size, -1).chunk(2, dim=2)
        for row, slot in enumerate(slots.tolist()):
            key_cache[slot // size, :, slot % size] = key[row]
            value_cache[slot // size, :, slot % size] = value[row]

    layer = SimpleNamespace(impl=SimpleNamespace(do_kv_cache_update=plain))
    assert not reads_back(layer, torch.zeros(4, KV_HEADS, 16, 2 * DIM))
    cache = torch.zeros(2, KV_HEADS, 16, 2 * DIM)
    plain(layer, torch.ones(3, KV_HEADS, DIM), torch.ones(3, KV_HEADS, DIM), cache, torch.arange(3))
    keys, values = read_rows(cache, torch.arange(2), 0, 3)
    assert torch.equal(values, torch.ones(3, KV_HEADS, DIM)) and not torch.equal(keys, values)
