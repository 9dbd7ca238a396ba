"""Selective attention over a fused KV cache with each query's exact causal mask.

Only the selected tokens are recomputed, so the query block is a sparse subset of the prompt. A
query at prompt position p sees keys 0..p exactly; a bottom-right aligned mask would be wrong.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

QUERY_BLOCK = 256
"""Queries per block; each block reads keys only up to its last query's position."""


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
) -> Tensor:
    """Attention of the selected queries over the whole fused K/V.

    q: [num_selected, num_heads, head_dim] at prompt positions `query_positions` (sorted,
    each < num_ctx_tokens); k, v: [num_ctx_tokens, num_kv_heads, head_dim] for positions
    0..num_ctx_tokens-1. num_heads must be a multiple of num_kv_heads (query head h reads KV head
    h // (num_heads // num_kv_heads)). Computed in fp32; returns [num_selected, num_heads,
    head_dim] in q's dtype.
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
    positions = query_positions.to(q.device)
    keys, values = k.float().transpose(0, 1), v.float().transpose(0, 1)
    blocks = []
    for start in range(0, q.shape[0], QUERY_BLOCK):
        block_positions = positions[start : start + QUERY_BLOCK]
        # Sorted positions: no query in this block sees past the block's last position.
        visible = int(block_positions[-1]) + 1
        blocks.append(
            F.scaled_dot_product_attention(
                q[start : start + QUERY_BLOCK].float().transpose(0, 1),
                keys[:, :visible],
                values[:, :visible],
                attn_mask=causal_mask(block_positions, visible),
                scale=scale,
                enable_gqa=q.shape[1] != k.shape[1],
            )
        )
    out = torch.cat(blocks, dim=1)
    return out.transpose(0, 1).to(q.dtype)
