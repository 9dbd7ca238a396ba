"""The blend maths on a CUDA GPU against the same maths on the CPU (skipped without a GPU).

vLLM's CUDA worker hands the blend GPU tensors while the chunk KV comes from host memory, disk or
Redis: every tensor the maths make must land on the model's device, and a GPU must pick the same
tokens to recompute as the CPU does. CI has no GPU; these run wherever one is visible.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from engine.blend.attention import GPU_QUERY_BLOCK, QUERY_BLOCK, selective_attention
from engine.blend.behind import compute_prefix, prefill_behind
from engine.blend.fuse import (
    BlendResult,
    CachedChunk,
    LayerHooks,
    PlacedChunks,
    Prompt,
    blend_prefill,
)
from engine.blend.rope import rotate_keys
from engine.contract import METRICS
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import blend_at, reference_kv, rope_spec, tiny_llama

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA = torch.device("cuda")
PREFIX = [1]
QUESTION = [9, 8, 7, 6]
Layers = list[tuple[Tensor, Tensor]]


def _scene(seed: int = 5) -> tuple[Tensor, list[list[int]], list[tuple[int, int]]]:
    generator = torch.Generator().manual_seed(seed)
    chunks = [torch.randint(2, 128, (24,), generator=generator).tolist() for _ in range(3)]
    ids, spans = list(PREFIX), []
    for chunk in chunks:
        spans.append((len(ids), len(ids) + len(chunk)))
        ids += chunk
    return torch.tensor(ids + QUESTION), chunks, spans


def _host_chunks(
    chunks: list[list[int]], spans: list[tuple[int, int]], dtype: torch.dtype
) -> list[CachedChunk]:
    """Each chunk's KV computed alone on the CPU, left in host memory as a KV store gives it."""
    model = tiny_llama()
    placed = []
    for chunk, (start, end) in zip(chunks, spans, strict=True):
        alone = reference_kv(model, torch.tensor(PREFIX + chunk))
        layers = [(k[len(PREFIX) :].to(dtype), v[len(PREFIX) :].to(dtype)) for k, v in alone]
        placed.append(CachedChunk(start, end, len(PREFIX), iter(layers)))
    return placed


def _blend(
    device: torch.device, ratio: float, dtype: torch.dtype = torch.float32, **choices: str
) -> tuple[BlendResult, Layers]:
    ids, chunks, spans = _scene()
    layers: Layers = []
    cached = PlacedChunks(_host_chunks(chunks, spans, dtype), rope_spec(), ids.numel(), device)
    result = blend_prefill(
        HFAdapter(tiny_llama().to(device, dtype)),
        Prompt(ids.to(device)),
        cached,
        blend_at(ratio, **choices),
        LayerHooks(lambda _layer, k, v: layers.append((k.float().cpu(), v.float().cpu()))),
    )
    return result, layers


def _relative_error(layers: Layers, reference: Layers) -> float:
    return max(
        float((torch.cat([k, v]) - torch.cat([rk, rv])).norm() / torch.cat([rk, rv]).norm())
        for (k, v), (rk, rv) in zip(layers, reference, strict=True)
    )


@pytest.mark.parametrize("metric", METRICS)
def test_every_metric_recomputes_the_same_tokens_on_cuda_as_on_cpu(metric: str) -> None:
    on_cpu, cpu_layers = _blend(torch.device("cpu"), 0.25, metric=metric)
    on_cuda, cuda_layers = _blend(CUDA, 0.25, metric=metric)
    assert on_cuda.recomputed_positions.device.type == "cuda"
    assert torch.equal(on_cuda.recomputed_positions.cpu(), on_cpu.recomputed_positions)
    assert _relative_error(cuda_layers, cpu_layers) < 1e-4


def test_bf16_on_cuda_at_ratio_one_is_the_full_prefill() -> None:
    ids, _, _ = _scene()
    result, layers = _blend(CUDA, 1.0, torch.bfloat16)
    assert result.recomputed_tokens == ids.numel()
    assert _relative_error(layers, reference_kv(tiny_llama(), ids)) < 2e-2


def test_bf16_on_cuda_reuses_what_fp32_on_cpu_reuses() -> None:
    fp32, _ = _blend(torch.device("cpu"), 0.25, metric="probe")
    bf16, _ = _blend(CUDA, 0.25, torch.bfloat16, metric="probe")
    assert bf16.reused_tokens == fp32.reused_tokens > 0


def test_chunks_computed_behind_a_prefix_on_cuda_match_the_cpu() -> None:
    chunks = [[5, 6, 7, 8, 9], list(range(20, 60)), [3] * 12]
    layers: dict[str, list[Layers]] = {}
    for name, device in (("cpu", torch.device("cpu")), ("cuda", CUDA)):
        adapter = HFAdapter(tiny_llama().to(device))
        prefix = compute_prefix(adapter, torch.arange(1, 30, device=device))
        layers[name] = [[] for _ in chunks]
        prefill_behind(
            adapter,
            prefix,
            [torch.tensor(chunk, device=device) for chunk in chunks],
            lambda index, _layer, k, v, out=layers[name]: out[index].append((k.cpu(), v.cpu())),
        )
    for on_cuda, on_cpu in zip(layers["cuda"], layers["cpu"], strict=True):
        assert _relative_error(on_cuda, on_cpu) < 1e-4


def test_keys_moved_8k_positions_on_cuda_in_bf16_match_the_cpu_in_fp32() -> None:
    keys = torch.randn(300, 2, 16, generator=torch.Generator().manual_seed(0))
    deltas = torch.arange(300) * 29  # up to ~8.7K positions
    on_cpu = rotate_keys(keys, deltas, rope_spec())
    on_cuda = rotate_keys(keys.to(CUDA, torch.bfloat16), deltas.to(CUDA), rope_spec())
    assert on_cuda.dtype == torch.bfloat16
    torch.testing.assert_close(on_cuda.float().cpu(), on_cpu, atol=3e-2, rtol=2e-2)


def test_sparse_queries_over_several_query_blocks_attend_alike_on_cuda() -> None:
    generator = torch.Generator().manual_seed(1)
    num_keys = 3 * QUERY_BLOCK + 40
    positions = torch.randperm(num_keys, generator=generator)[: QUERY_BLOCK + 90].sort().values
    q = torch.randn(positions.numel(), 4, 16, generator=generator)
    k, v = (torch.randn(num_keys, 2, 16, generator=generator) for _ in range(2))
    on_cpu = selective_attention(q, k, v, positions, 0.25)
    on_cuda = selective_attention(*(t.to(CUDA) for t in (q, k, v, positions)), 0.25)
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("gap", [0, 1], ids=["whole prompt", "one token left out"])
def test_long_prompts_attend_on_cuda_in_bf16_as_on_the_cpu_in_fp32(gap: int) -> None:
    """Consecutive queries take the fused causal kernel, any gap an explicit mask."""
    generator = torch.Generator().manual_seed(2)
    num_keys = GPU_QUERY_BLOCK + 900
    positions = torch.cat([torch.arange(0, 700), torch.arange(700 + gap, num_keys)])
    q = torch.randn(positions.numel(), 4, 16, generator=generator)
    k, v = (torch.randn(num_keys, 2, 16, generator=generator) for _ in range(2))
    on_cpu = selective_attention(q, k, v, positions, 0.25)
    on_cuda = selective_attention(
        *(t.to(CUDA, torch.bfloat16) for t in (q, k, v)), positions.to(CUDA), 0.25
    )
    assert on_cuda.dtype == torch.bfloat16
    torch.testing.assert_close(on_cuda.float().cpu(), on_cpu, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_position_in_one_causal_pass_on_cuda_as_on_the_cpu(dtype: torch.dtype) -> None:
    """Told the queries are every position, both devices take one causal pass (fp32 on the GPU
    with its K/V heads repeated: flash takes no fp32)."""
    generator = torch.Generator().manual_seed(3)
    num_keys = GPU_QUERY_BLOCK + 900
    q = torch.randn(num_keys, 4, 16, generator=generator)
    k, v = (torch.randn(num_keys, 2, 16, generator=generator) for _ in range(2))
    positions = torch.arange(num_keys)
    on_cpu = selective_attention(q, k, v, positions, 0.25, True)
    on_cuda = selective_attention(*(t.to(CUDA, dtype) for t in (q, k, v)), positions, 0.25, True)
    assert on_cuda.dtype == dtype
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(on_cuda.float().cpu(), on_cpu, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("metric", ["probe", "v", "qv"])
def test_a_blend_from_host_memory_never_waits_for_the_gpu(metric: str) -> None:
    """Chunk KV copied ahead on a side stream, selection on the device: nothing in the blend
    synchronizes (CUDA's sync debug mode raises on any wait)."""
    ids, chunks, spans = _scene()
    adapter = HFAdapter(tiny_llama().to(CUDA))
    placed = [
        CachedChunk(c.start, c.end, c.source_start, iter([(k.pin_memory(), v.pin_memory())
                                                          for k, v in c.layers]))
        for c in _host_chunks(chunks, spans, torch.float32)
    ]  # fmt: skip
    token_ids = ids.to(CUDA)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        result = blend_prefill(
            adapter, Prompt(token_ids), PlacedChunks(placed, rope_spec(), ids.numel(), CUDA),
            blend_at(0.25, metric=metric), LayerHooks(lambda *_: None),
        )  # fmt: skip
    finally:
        torch.cuda.set_sync_debug_mode("default")
    on_cpu, _ = _blend(torch.device("cpu"), 0.25, metric=metric)
    assert torch.equal(result.recomputed_positions.cpu(), on_cpu.recomputed_positions)


@pytest.mark.parametrize("tail", [True, False])
def test_attention_told_where_the_queries_lie_reads_nothing_back(tail: bool) -> None:
    generator = torch.Generator().manual_seed(3)
    num_keys = GPU_QUERY_BLOCK + 500
    positions = torch.arange(num_keys - GPU_QUERY_BLOCK - 100, num_keys)
    if not tail:
        positions = positions[positions % 3 != 1]
    q = torch.randn(positions.numel(), 4, 16, generator=generator)
    k, v = (torch.randn(num_keys, 2, 16, generator=generator) for _ in range(2))
    on_cpu = selective_attention(q, k, v, positions, 0.25)
    inputs = [t.to(CUDA, torch.bfloat16) for t in (q, k, v)]
    on_device = positions.to(CUDA)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        on_cuda = selective_attention(*inputs, on_device, 0.25, tail)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.testing.assert_close(on_cuda.float().cpu(), on_cpu, atol=2e-2, rtol=2e-2)
