"""Selective attention through vLLM's own CPU paged-attention kernel, with exact causal masks.

vLLM's kernels align the causal mask bottom-right within each sequence, which is exact for a
run of consecutive query positions [a, a+L) over keys [0, a+L). So each maximal run of selected
positions becomes one sequence over the request's block table, and every query sees exactly the
keys up to its own position. The fused K/V of the layer must already be in the paged cache.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def paged_kernel_preferred(isa: str) -> bool:
    """Whether vLLM's kernel of instruction set ``isa`` should compute a blend's selective
    attention over torch's fused SDPA kernel (``engine.blend.attention``) when either could.

    Its portable kernels (``vec``, ``vec16``) run each run of consecutive queries as a sequence of
    its own, and a blend's recomputed tokens fall in many short runs: on an AVX2 EPYC in float32
    they took 1.45-1.90x SDPA's time per query on one layer's shapes
    (``load_tests.bench_paged_attention``). The AMX kernels are kept: not measured against it.
    """
    return isa == "amx"


def position_runs(positions: Tensor) -> tuple[Tensor, Tensor]:
    """For sorted positions: (query_start_loc [runs+1], seq_lens [runs]), both int32."""
    count = positions.numel()
    breaks = (positions[1:] != positions[:-1] + 1).nonzero().flatten() + 1
    ends = torch.cat((breaks, torch.tensor([count], device=positions.device)))
    query_start_loc = torch.cat((torch.zeros(1, dtype=ends.dtype, device=ends.device), ends))
    return query_start_loc.to(torch.int32), (positions[ends - 1] + 1).to(torch.int32)


def attend_runs(
    q: Tensor,
    positions: Tensor,
    kv_cache: Tensor,
    block_ids: Tensor,
    *,
    scale: float,
    isa: str,
    kv_cache_dtype: str = "auto",
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> Tensor:
    """Attention of queries q [n, heads, dim] at sorted prompt ``positions`` over one request's
    paged ``kv_cache`` (vLLM's CPU layout) whose blocks are ``block_ids``."""
    from vllm import _custom_ops as ops

    num_blocks, num_kv_heads, block_size, _ = kv_cache.shape
    key_cache, value_cache = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, -1).chunk(
        2, dim=2
    )
    query_start_loc, seq_lens = position_runs(positions)
    runs = seq_lens.numel()
    block_table = block_ids.expand(runs, -1).contiguous()
    scheduler = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=runs,
        num_heads=q.shape[1],
        num_kv_heads=num_kv_heads,
        head_dim=q.shape[2],
        seq_lens=seq_lens,
        dtype=q.dtype,
        query_start_loc=query_start_loc,
        causal=True,
        sliding_window_size=-1,
        isa=isa,
        enable_kv_split=False,
        kv_cache_dtype=kv_cache_dtype,
    )
    output = torch.empty_like(q)
    ops.cpu_attention_with_kv_cache(
        query=q.contiguous(),
        key_cache=key_cache,
        value_cache=value_cache,
        output=output,
        query_start_loc=query_start_loc,
        seq_lens=seq_lens,
        scale=scale,
        causal=True,
        alibi_slopes=None,
        sliding_window=-1,
        block_table=block_table,
        softcap=0,
        scheduler_metadata=scheduler,
        s_aux=None,
        k_scale=k_scale,
        v_scale=v_scale,
        kv_cache_dtype=kv_cache_dtype,
    )
    return output


class CpuPagedAttention:
    """``attend(layer, q, positions)`` for one request whose KV sits in ``block_ids``."""

    def __init__(
        self, layers: list[nn.Module], kv_caches: dict[str, Tensor], block_ids: list[int]
    ) -> None:
        self.layers = layers
        self.kv_caches = kv_caches
        self.block_ids = torch.tensor(block_ids, dtype=torch.int32)

    def __call__(self, layer_index: int, q: Tensor, positions: Tensor) -> Tensor:
        layer = self.layers[layer_index]
        impl = layer.impl
        return attend_runs(
            q,
            positions,
            self.kv_caches[layer.layer_name],
            self.block_ids,
            scale=impl.scale,
            isa=layer.isa,
            kv_cache_dtype=impl.kv_cache_dtype,
            k_scale=layer._k_scale_float,
            v_scale=layer._v_scale_float,
        )
