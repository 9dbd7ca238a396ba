"""A chunk computed behind a kept prefix KV against a plain prefill of the prefix and chunk."""

from __future__ import annotations

import torch
from torch import Tensor

from engine.blend.behind import PrefixKV, compute_prefix, prefill_behind
from tests.unit.tiny_llama import LAYERS, HFAdapter, reference_kv, tiny_llama


def _behind(model, prefix: list[int], chunk: list[int]) -> list[tuple[Tensor, Tensor]]:
    adapter = HFAdapter(model)
    kept = compute_prefix(adapter, torch.tensor(prefix))
    layers: list[tuple[Tensor, Tensor]] = []
    prefill_behind(adapter, kept, torch.tensor(chunk), lambda _l, k, v: layers.append((k, v)))
    return layers


def test_a_chunk_behind_the_kept_prefix_has_the_kv_of_a_full_prefill() -> None:
    model = tiny_llama()
    prefix, chunk = list(range(1, 40)), list(range(60, 90))
    layers = _behind(model, prefix, chunk)
    reference = reference_kv(model, torch.tensor(prefix + chunk))
    assert len(layers) == LAYERS
    for (k, v), (rk, rv) in zip(layers, reference, strict=True):
        assert k.shape == rk[len(prefix) :].shape
        torch.testing.assert_close(k, rk[len(prefix) :], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v, rv[len(prefix) :], atol=1e-5, rtol=1e-4)


def test_one_kept_prefix_serves_many_chunks_and_each_sees_it() -> None:
    model = tiny_llama()
    adapter = HFAdapter(model)
    kept = compute_prefix(adapter, torch.tensor([5, 6, 7, 8]))
    other = compute_prefix(adapter, torch.tensor([9, 10, 11, 12]))
    for chunk in ([20, 21, 22], [30, 31]):
        behind_kept, behind_other = (
            _last_values(adapter, kept, chunk),
            _last_values(adapter, other, chunk),
        )
        reference = reference_kv(model, torch.tensor([5, 6, 7, 8, *chunk]))
        torch.testing.assert_close(behind_kept, reference[-1][1][4:], atol=1e-5, rtol=1e-4)
        assert not torch.allclose(behind_other, behind_kept)  # the prefix's content matters


def _last_values(adapter: HFAdapter, prefix: PrefixKV, chunk: list[int]) -> Tensor:
    values: list[Tensor] = []
    prefill_behind(adapter, prefix, torch.tensor(chunk), lambda _l, _k, v: values.append(v))
    return values[-1]
