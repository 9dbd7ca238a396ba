"""Chunks computed behind a kept prefix KV against a plain prefill of the prefix and each chunk."""

from __future__ import annotations

import torch
from torch import Tensor

from engine.blend.behind import PrefixKV, compute_prefix, prefill_behind
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import LAYERS, reference_kv, tiny_llama

Layers = list[tuple[Tensor, Tensor]]


def _behind(adapter: HFAdapter, prefix: PrefixKV, chunks: list[list[int]]) -> list[Layers]:
    """Each chunk's per-layer (keys, values), all chunks computed in one pass."""
    layers: list[Layers] = [[] for _ in chunks]

    def keep(chunk: int, _layer: int, keys: Tensor, values: Tensor) -> None:
        layers[chunk].append((keys.clone(), values.clone()))

    prefill_behind(adapter, prefix, [torch.tensor(chunk) for chunk in chunks], keep)
    return layers


def _assert_as_full_prefill(model, prefix: list[int], chunk: list[int], layers: Layers) -> None:
    reference = reference_kv(model, torch.tensor(prefix + chunk))
    assert len(layers) == LAYERS
    for (k, v), (rk, rv) in zip(layers, reference, strict=True):
        torch.testing.assert_close(k, rk[len(prefix) :], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v, rv[len(prefix) :], atol=1e-5, rtol=1e-4)


def test_the_kept_prefix_is_what_a_full_prefill_computes() -> None:
    model = tiny_llama()
    prefix = list(range(1, 40))
    kept = compute_prefix(HFAdapter(model), torch.tensor(prefix))
    assert kept.token_ids == tuple(prefix)
    _assert_as_full_prefill(model, [], prefix, list(kept.layers))


def test_chunks_computed_together_each_have_the_kv_of_a_prefill_behind_the_prefix() -> None:
    model = tiny_llama()
    adapter = HFAdapter(model)
    prefix = list(range(1, 40))
    chunks = [list(range(60, 90)), [7, 8, 9], list(range(100, 117))]
    together = _behind(adapter, compute_prefix(adapter, torch.tensor(prefix)), chunks)
    for chunk, layers in zip(chunks, together, strict=True):
        _assert_as_full_prefill(model, prefix, chunk, layers)


def test_each_chunk_sees_the_prefix_and_not_the_others() -> None:
    model = tiny_llama()
    adapter = HFAdapter(model)
    kept = compute_prefix(adapter, torch.tensor([5, 6, 7, 8]))
    other = compute_prefix(adapter, torch.tensor([9, 10, 11, 12]))
    alone = _behind(adapter, kept, [[30, 31]])[0]
    after_another = _behind(adapter, kept, [[20, 21, 22], [30, 31]])[1]
    behind_other = _behind(adapter, other, [[30, 31]])[0]
    torch.testing.assert_close(after_another[-1], alone[-1], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(behind_other[-1][1], alone[-1][1])  # the prefix's content matters
