"""Chunk K/V copied out of vLLM's CPU paged cache are the rows vLLM's own cache update wrote,
whichever block layout its kernels use (portable: keys transposed; AMX: dimension pairs packed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.connector.paged_read import BlockLayout

KV_HEADS, DIM = 2, 64


def cpu_layer(dtype: torch.dtype, block_size: int, isa: str | None = None) -> SimpleNamespace:
    """An attention layer whose cache update is vLLM's CPU backend's own, for ``isa`` (default:
    the one vLLM picks on this machine)."""
    pytest.importorskip("vllm._custom_ops")
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackendImpl, _get_attn_isa

    state = SimpleNamespace(attn_type=AttentionType.DECODER, kv_cache_dtype="auto")
    layer = SimpleNamespace(
        isa=isa or _get_attn_isa(dtype, block_size, DIM, "auto"),
        _k_scale_float=1.0,
        _v_scale_float=1.0,
    )

    def update(layer, key, value, kv_cache, slots) -> None:
        CPUAttentionBackendImpl.do_kv_cache_update(state, layer, key, value, kv_cache, slots)

    layer.impl = SimpleNamespace(do_kv_cache_update=update)
    return layer


def written_and_read(
    layer: SimpleNamespace, dtype: torch.dtype, block_size: int, strided: bool = True
) -> None:
    """A chunk straddling four scattered blocks reads back as written; ``strided``: read as
    strided views (else by gathering each element)."""
    cache = torch.zeros(9, KV_HEADS, block_size, 2 * DIM, dtype=dtype)
    layout = BlockLayout.learn(layer, cache)
    assert layout is not None
    assert (layout.strided is not None) == strided
    num_tokens = 3 * block_size + 5
    block_ids = torch.tensor([7, 2, 5, 0])  # the request's blocks, in prompt order
    positions = torch.arange(num_tokens)
    slots = block_ids[positions // block_size] * block_size + positions % block_size
    keys = torch.randn(num_tokens, KV_HEADS, DIM).to(dtype)
    values = torch.randn(num_tokens, KV_HEADS, DIM).to(dtype)
    layer.impl.do_kv_cache_update(layer, keys, values, cache, slots)
    start, end = block_size - 3, 3 * block_size + 2
    read_keys, read_values = layout.read_rows(cache, block_ids, start, end)
    assert torch.equal(read_keys, keys[start:end]) and torch.equal(read_values, values[start:end])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_this_machines_layout_reads_back(dtype: torch.dtype, block_size: int) -> None:
    written_and_read(cpu_layer(dtype, block_size), dtype, block_size)


@pytest.mark.parametrize("isa", ["vec", "vec16", "amx"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_every_kernel_layout_reads_back(isa: str, dtype: torch.dtype) -> None:
    """The layouts of kernels other than this machine's where its CPU can run their cache
    update (AMX's packs with instructions only AMX machines are sure to have)."""
    if isa == "amx" and not torch.cpu._is_amx_tile_supported():
        pytest.skip("AMX's cache update runs on AMX CPUs only")
    layer = cpu_layer(dtype, 32, isa)
    try:
        layer.impl.do_kv_cache_update(
            layer, *(torch.zeros(1, KV_HEADS, DIM, dtype=dtype),) * 2,
            torch.zeros(1, KV_HEADS, 32, 2 * DIM, dtype=dtype), torch.zeros(1, dtype=torch.long),
        )  # fmt: skip
    except RuntimeError as exc:
        pytest.skip(f"this vLLM build has no {isa} cache update: {exc}")
    written_and_read(layer, dtype, 32)


def test_a_cache_update_that_loses_elements_is_not_read() -> None:
    """An update that writes only every other dimension: the worker leaves such a cache alone."""

    def lossy(_layer, key, value, kv_cache, slots) -> None:
        blocks, heads, size, _ = kv_cache.shape
        key_cache, value_cache = kv_cache.view(blocks, heads, 2 * size, -1).chunk(2, dim=2)
        for row, slot in enumerate(slots.tolist()):
            key_cache[slot // size, :, slot % size, ::2] = key[row, :, ::2]
            value_cache[slot // size, :, slot % size] = value[row]

    layer = SimpleNamespace(impl=SimpleNamespace(do_kv_cache_update=lossy))
    assert BlockLayout.learn(layer, torch.zeros(4, KV_HEADS, 16, 2 * DIM)) is None


def test_a_plain_layout_is_learnt_too() -> None:
    """Keys untransposed (no vLLM kernel's): learnt from the update itself, not assumed."""

    def plain(_layer, key, value, kv_cache, slots) -> None:
        blocks, heads, size, _ = kv_cache.shape
        key_cache, value_cache = kv_cache.view(blocks, heads, 2 * size, -1).chunk(2, dim=2)
        for row, slot in enumerate(slots.tolist()):
            key_cache[slot // size, :, slot % size] = key[row]
            value_cache[slot // size, :, slot % size] = value[row]

    layer = SimpleNamespace(impl=SimpleNamespace(do_kv_cache_update=plain))
    written_and_read(layer, torch.float32, 16)


def test_a_layout_with_no_strided_form_is_read_element_by_element() -> None:
    """Each block's elements scattered by a fixed random permutation: no view places them, the
    read gathers them and still gets what was written."""
    size = 16
    scatter = torch.randperm(2 * size * KV_HEADS * DIM, generator=torch.Generator().manual_seed(4))

    def scrambled(_layer, key, value, kv_cache, slots) -> None:
        blocks = kv_cache.view(kv_cache.shape[0], -1)
        for row, slot in enumerate(slots.tolist()):
            block, at = divmod(slot, size)
            for half, source in enumerate((key, value)):
                logical = torch.arange(KV_HEADS * DIM) + (half * size + at) * KV_HEADS * DIM
                blocks[block, scatter[logical]] = source[row].flatten()

    layer = SimpleNamespace(impl=SimpleNamespace(do_kv_cache_update=scrambled))
    written_and_read(layer, torch.float32, size, strided=False)
