"""Selective attention through vLLM's CPU paged kernel equals the exact-mask reference."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.blend.attention import selective_attention
from engine.connector.paged_attention import CpuPagedAttention, position_runs

HEADS, KV_HEADS, DIM, BLOCK = 4, 2, 64, 128


def test_runs_of_consecutive_positions() -> None:
    starts, seq_lens = position_runs(torch.tensor([0, 1, 2, 7, 9, 10]))
    assert starts.tolist() == [0, 3, 4, 6]
    assert seq_lens.tolist() == [3, 8, 11]
    assert starts.dtype == seq_lens.dtype == torch.int32


def _paged_setup(num_tokens: int, dtype: torch.dtype):
    ops = pytest.importorskip("vllm._custom_ops")
    if not hasattr(torch.ops._C, "cpu_attention_with_kv_cache"):
        pytest.skip("this vLLM build has no CPU attention kernel")
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    isa = _get_attn_isa(dtype, BLOCK, DIM, "auto")
    block_ids = [3 + index for index in range((num_tokens + BLOCK - 1) // BLOCK)][::-1]
    cache = torch.zeros(len(block_ids) + 8, KV_HEADS, BLOCK, 2 * DIM, dtype=dtype)
    keys = torch.randn(num_tokens, KV_HEADS, DIM, dtype=dtype)
    values = torch.randn(num_tokens, KV_HEADS, DIM, dtype=dtype)
    key_cache, value_cache = cache.view(cache.shape[0], KV_HEADS, 2 * BLOCK, DIM).chunk(2, dim=2)
    positions = torch.arange(num_tokens)
    slots = torch.tensor(block_ids)[positions // BLOCK] * BLOCK + positions % BLOCK
    ops.cpu_attn_reshape_and_cache(keys, values, key_cache, value_cache, slots, isa, 1.0, 1.0)
    layer = SimpleNamespace(
        impl=SimpleNamespace(kv_cache_dtype="auto", scale=DIM**-0.5),
        layer_name="layer0",
        isa=isa,
        _k_scale_float=1.0,
        _v_scale_float=1.0,
    )
    return CpuPagedAttention([layer], {"layer0": cache}, block_ids), keys, values


@pytest.mark.parametrize("selected", [300, 41, 1])
def test_paged_kernel_matches_exact_mask_attention(selected: int) -> None:
    torch.manual_seed(selected)
    num_tokens = 300
    attention, keys, values = _paged_setup(num_tokens, torch.bfloat16)
    positions = torch.sort(torch.randperm(num_tokens)[:selected]).values
    queries = torch.randn(selected, HEADS, DIM, dtype=torch.bfloat16)
    expected = selective_attention(queries, keys, values, positions, DIM**-0.5)
    got = attention(0, queries, positions)
    torch.testing.assert_close(got.float(), expected.float(), atol=2e-2, rtol=2e-2)
