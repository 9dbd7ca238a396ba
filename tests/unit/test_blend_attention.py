"""Selective attention with exact causal masks against full attention and a naive loop."""

import math

import pytest
import torch
import torch.nn.functional as F

from engine.blend.attention import QUERY_BLOCK, selective_attention


def qkv(tokens: int, heads: int, kv_heads: int, dim: int = 16, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(tokens, heads, dim, generator=gen),
        torch.randn(tokens, kv_heads, dim, generator=gen),
        torch.randn(tokens, kv_heads, dim, generator=gen),
    )


def naive_attention(q, k, v, positions: list[int], scale: float) -> torch.Tensor:
    """One query at a time: softmax over keys 0..pos of the query head's KV head."""
    group = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for row, pos in enumerate(positions):
        for h in range(q.shape[1]):
            keys, values = k[: pos + 1, h // group], v[: pos + 1, h // group]
            weights = torch.softmax(keys @ q[row, h] * scale, dim=0)
            out[row, h] = weights @ values
    return out


def full_causal(q, k, v, scale: float) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, scale=scale
    )
    return out.transpose(0, 1)


def test_all_positions_equal_full_causal_attention() -> None:
    q, k, v = qkv(tokens=12, heads=4, kv_heads=4)
    scale = 1 / math.sqrt(16)
    got = selective_attention(q, k, v, torch.arange(12), scale)
    torch.testing.assert_close(got, full_causal(q, k, v, scale), atol=1e-5, rtol=1e-5)


def test_subset_equals_rows_of_full_result() -> None:
    q, k, v = qkv(tokens=20, heads=2, kv_heads=2)
    scale = 0.3
    rows = torch.tensor([0, 3, 4, 11, 17])
    got = selective_attention(q[rows], k, v, rows, scale)
    torch.testing.assert_close(got, full_causal(q, k, v, scale)[rows], atol=1e-5, rtol=1e-5)


def test_mask_is_not_bottom_right_aligned() -> None:
    q, k, v = qkv(tokens=10, heads=1, kv_heads=1)
    got = selective_attention(q[:1], k, v, torch.tensor([0]), 0.25)
    torch.testing.assert_close(got[0, 0], v[0, 0])  # position 0 sees only itself


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 2), (6, 3), (4, 1)])
def test_grouped_query_attention_matches_loop(heads: int, kv_heads: int) -> None:
    q, k, v = qkv(tokens=15, heads=heads, kv_heads=kv_heads, seed=heads)
    positions = [1, 2, 7, 8, 14]
    got = selective_attention(q[positions], k, v, torch.tensor(positions), 0.2)
    expected = naive_attention(q[positions], k, v, positions, 0.2)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_bf16_in_bf16_out() -> None:
    q, k, v = qkv(tokens=9, heads=4, kv_heads=2)
    positions = [2, 5, 8]
    got = selective_attention(
        q[positions].bfloat16(), k.bfloat16(), v.bfloat16(), torch.tensor(positions), 0.25
    )
    assert got.dtype == torch.bfloat16
    expected = naive_attention(q[positions], k, v, positions, 0.25)
    torch.testing.assert_close(got.float(), expected, atol=3e-2, rtol=2e-2)


def test_selective_attention_rejects_bad_shapes() -> None:
    q, k, v = qkv(tokens=6, heads=3, kv_heads=2)
    with pytest.raises(ValueError, match="multiple"):
        selective_attention(q, k, v, torch.arange(6), 0.25)
    q, k, v = qkv(tokens=6, heads=4, kv_heads=2)
    with pytest.raises(ValueError, match="query_positions"):
        selective_attention(q, k, v, torch.arange(5), 0.25)


def test_many_query_blocks_match_one_full_causal_attention() -> None:
    torch.manual_seed(7)
    n = QUERY_BLOCK * 2 + 37
    q, k, v = torch.randn(n, 4, 8), torch.randn(n, 2, 8), torch.randn(n, 2, 8)
    positions = torch.arange(n)
    expected = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, enable_gqa=True
    ).transpose(0, 1)
    got = selective_attention(q, k, v, positions, scale=8**-0.5)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("first", [0, 5])
def test_a_tail_run_matches_loop(first: int) -> None:
    """Told the queries end at the last key (the every-token layer from 0, a chunk behind a
    prefix from 5), the CPU answers as the loop does."""
    q, k, v = qkv(tokens=14, heads=6, kv_heads=2, seed=first)
    positions = list(range(first, 14))
    got = selective_attention(q[positions], k, v, torch.tensor(positions), 0.3, tail=True)
    torch.testing.assert_close(got, naive_attention(q[positions], k, v, positions, 0.3),
                               atol=1e-5, rtol=1e-5)  # fmt: skip
