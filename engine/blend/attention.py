"""Selective attention over a fused KV cache with each query's exact causal mask.

Only the selected tokens are recomputed, so the query block is a sparse subset of the prompt. A
query at prompt position p sees keys 0..p exactly; a bottom-right aligned mask would be wrong.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.bias import causal_lower_right

QUERY_BLOCK = 256
"""Queries per block on the CPU; each block reads keys only up to its last query's position."""
GPU_QUERY_BLOCK = 4096
"""Queries per block on a GPU, which bounds a block's mask (queries x keys) in memory."""


def causal_mask(query_positions: Tensor, num_ctx_tokens: int) -> Tensor:
    """Boolean mask [num_queries, num_ctx_tokens]: True where key position <= query position."""
    keys = torch.arange(num_ctx_tokens, device=query_positions.device)
    return keys[None, :] <= query_positions[:, None]


def selective_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    query_positions: Tensor,
    scale: float,
    tail: bool | None = None,
) -> Tensor:
    """Attention of the selected queries over the whole fused K/V.

    q: [num_selected, num_heads, head_dim] at prompt positions `query_positions` (ascending,
    distinct, each < num_ctx_tokens); k, v: [num_ctx_tokens, num_kv_heads, head_dim] for
    positions 0..num_ctx_tokens-1. num_heads must be a multiple of num_kv_heads (query head h
    reads KV head h // (num_heads // num_kv_heads)). Computed by torch's fused kernels in q's
    dtype, which accumulate in fp32 (on the CPU a dtype other than bf16 in fp32); returns
    [num_selected, num_heads, head_dim] in q's dtype.

    ``tail`` says, where the caller knows, whether the queries are the keys' last positions (a
    run ending at the last key): a GPU then reads nothing back (True: the causal kernel; False:
    an explicit mask over all keys). None: a GPU reads each block's first and last positions.
    ``tail`` with every position takes one causal pass without a mask, on either device.
    """
    if q.dim() != 3 or k.dim() != 3 or k.shape != v.shape:
        raise ValueError(
            f"expected q [n, heads, dim] and k, v [ctx, kv_heads, dim], got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"head_dim must match and num_heads ({q.shape[1]}) be a multiple of "
            f"num_kv_heads ({k.shape[1]})"
        )
    if query_positions.shape != (q.shape[0],):
        raise ValueError(f"query_positions shape {tuple(query_positions.shape)} != ({q.shape[0]},)")
    if tail and q.shape[0] == k.shape[0]:
        return _every_position(q, k, v, scale)
    positions = query_positions.to(q.device)
    if q.is_cuda:
        return _fused_kernel_attention(q, k, v, positions, scale, tail)
    return _cpu_attention(q, k, v, positions, scale)


def _every_position(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    """Every position's query: one causal pass over grouped heads as they are, the call a
    Hugging Face forward makes without padding."""
    dtype = q.dtype if q.is_cuda else _cpu_dtype(q.dtype)
    groups = q.shape[1] // k.shape[1]
    if q.is_cuda and dtype == torch.float32 and groups > 1:
        # flash reads grouped heads but takes no fp32; the memory-efficient kernel reads no groups
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    # [1, heads, tokens, dim]: given 3-D inputs, the CPU runs SDPA unfused, about 3x slower
    query, keys, values = (x.to(dtype).transpose(0, 1)[None] for x in (q, k, v))
    out = F.scaled_dot_product_attention(
        query, keys, values, is_causal=True, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
    return out[0].transpose(0, 1).to(q.dtype)


def _fused_kernel_attention(
    q: Tensor, k: Tensor, v: Tensor, positions: Tensor, scale: float, tail: bool | None
) -> Tensor:
    """``selective_attention`` on a GPU through torch's flash and memory-efficient kernels.

    A block of consecutive positions (a whole prompt, the question, a run of chosen tokens) is
    causal aligned bottom-right over the keys it sees, which the flash kernel runs as it is; any
    other block gets an explicit mask. A mask rules flash out, and the memory-efficient kernel
    has no grouped-query mode, so K/V heads are repeated to the query heads first: in fp32 with
    grouped heads, SDPA falls back to unfused maths many times slower than a full prefill. With
    ``tail`` given, no block's positions are read back to the host (nothing waits for the GPU).
    """
    groups = q.shape[1] // k.shape[1]
    # [1, heads, tokens, dim]: the fused kernels take batched 4-D inputs only
    keys, values = (
        x.to(q.dtype).repeat_interleave(groups, dim=1).transpose(0, 1)[None] for x in (k, v)
    )
    num_keys, num_queries = k.shape[0], q.shape[0]
    blocks = []
    for start in range(0, num_queries, GPU_QUERY_BLOCK):
        block_positions = positions[start : start + GPU_QUERY_BLOCK]
        count = block_positions.numel()
        if tail is None:
            first, last = (int(p) for p in block_positions[[0, -1]])
            visible, run = last + 1, last - first + 1 == count
        else:  # a tail's block ends where the queries after it begin
            visible = num_keys - (num_queries - start - count) if tail else num_keys
            run = tail
        mask = causal_lower_right(count, visible) if run else causal_mask(block_positions, visible)
        blocks.append(
            F.scaled_dot_product_attention(
                q[start : start + GPU_QUERY_BLOCK].transpose(0, 1)[None],
                keys[:, :, :visible],
                values[:, :, :visible],
                attn_mask=mask,
                scale=scale,
            )
        )
    out = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=2)
    return out[0].transpose(0, 1)


def _cpu_attention(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, scale: float) -> Tensor:
    """``selective_attention`` on the CPU through torch's fused CPU kernel, in blocks
    of queries with an exact mask."""
    dtype = _cpu_dtype(q.dtype)
    keys, values = (x.to(dtype).transpose(0, 1)[None] for x in (k, v))
    gqa = q.shape[1] != k.shape[1]
    blocks = []
    for start in range(0, q.shape[0], QUERY_BLOCK):
        block_positions = positions[start : start + QUERY_BLOCK]
        # Sorted positions: no query in this block sees past the block's last position.
        visible = int(block_positions[-1]) + 1
        blocks.append(
            F.scaled_dot_product_attention(
                q[start : start + QUERY_BLOCK].to(dtype).transpose(0, 1)[None],
                keys[:, :, :visible],
                values[:, :, :visible],
                attn_mask=causal_mask(block_positions, visible),
                scale=scale,
                enable_gqa=gqa,
            )
        )
    out = torch.cat(blocks, dim=2)
    return out[0].transpose(0, 1).to(q.dtype)


def _cpu_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the CPU kernel computes in: bf16 as it is (its flash kernel accumulates in fp32, as
    the engine's own prefill does; with AMX 2-3x as fast as converting to fp32 first), else
    fp32."""
    return dtype if dtype == torch.bfloat16 else torch.float32
