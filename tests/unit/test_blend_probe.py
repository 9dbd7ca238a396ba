"""Selection by a question probe: the tokens are chosen before any chunk token is computed."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from engine.blend.fuse import BlendResult, CachedChunk, LayerHooks, Prompt, blend_prefill
from engine.contract import Recipe
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import (
    HEADS,
    KV_HEADS,
    blend_at,
    placed_in,
    reference_kv,
    tiny_llama,
)

PREFIX = [1]
QUESTION = [9, 8, 7, 6]
CHUNKS = 3
CHUNK_TOKENS = 20


class CountingAdapter(HFAdapter):
    """The tiny Llama, remembering how many tokens each layer's projections computed."""

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.rows: list[int] = []

    def qkv(self, layer: int, hidden: Tensor, residual: Tensor | None, positions: Tensor):
        self.rows.append(positions.numel())
        return super().qkv(layer, hidden, residual, positions)


def _setup(seed: int = 3) -> tuple[Any, Tensor, list[list[int]], list[tuple[int, int]]]:
    model = tiny_llama(seed)
    generator = torch.Generator().manual_seed(seed)
    chunks = [
        torch.randint(2, 128, (CHUNK_TOKENS,), generator=generator).tolist() for _ in range(CHUNKS)
    ]
    ids, spans = list(PREFIX), []
    for chunk in chunks:
        spans.append((len(ids), len(ids) + len(chunk)))
        ids += chunk
    return model, torch.tensor(ids + QUESTION), chunks, spans


def _placed(model: Any, chunks: list[list[int]], spans: list[tuple[int, int]]) -> list[CachedChunk]:
    placed = []
    for chunk, (start, end) in zip(chunks, spans, strict=True):
        alone = reference_kv(model, torch.tensor(PREFIX + chunk))
        layers = [(k[len(PREFIX) :], v[len(PREFIX) :]) for k, v in alone]
        placed.append(CachedChunk(start, end, len(PREFIX), iter(layers)))
    return placed


def _blend(
    selection: Recipe, seed: int = 3, adapter: HFAdapter | None = None, attend: Any = None
) -> tuple[BlendResult, list[tuple[Tensor, Tensor]]]:
    model, ids, chunks, spans = _setup(seed)
    layers: list[tuple[Tensor, Tensor]] = []
    result = blend_prefill(
        adapter or HFAdapter(model),
        Prompt(ids),
        placed_in(ids, _placed(model, chunks, spans)),
        selection,
        LayerHooks(lambda _layer, k, v: layers.append((k.clone(), v.clone())), attend),
    )
    return result, layers


def _reference_question_attention(queries: Tensor, positions: Tensor, keys: Tensor) -> Tensor:
    """Each question query's causal softmax over the keys, summed, by plain loops."""
    total = torch.zeros(keys.shape[0])
    for row, position in enumerate(positions.tolist()):
        for head in range(HEADS):
            key = keys[: position + 1, head // (HEADS // KV_HEADS)]
            logits = key @ queries[row, head] / math.sqrt(keys.shape[-1])
            total[: position + 1] += logits.softmax(dim=0)
    return total


def test_the_probe_recomputes_the_question_and_the_ratio_from_layer_zero() -> None:
    adapter = CountingAdapter(tiny_llama(3))
    result, _ = _blend(blend_at(0.25, metric="probe"), adapter=adapter)
    question_start = len(PREFIX) + CHUNKS * CHUNK_TOKENS
    question = torch.arange(question_start, question_start + len(QUESTION))
    assert torch.isin(question, result.recomputed_positions).all()
    assert result.recomputed_tokens == len(PREFIX) + 15 + len(QUESTION)
    # The probe (uncached tokens through layers 0-1), then the chosen ones in every layer.
    probe = [len(PREFIX) + len(QUESTION)] * 2
    assert adapter.rows == probe + [result.recomputed_tokens] * adapter.num_layers


def test_the_probe_picks_what_the_question_reads_over_the_reused_cache() -> None:
    """Reuse computes the same uncached tokens over the same cache: at layer 1 its question
    queries and fused keys give, by plain loops, the tokens the probe must choose."""
    seen: dict[str, Tensor] = {}

    def attend(layer: int, q: Tensor, k: Tensor, v: Tensor, positions: Tensor) -> Tensor:
        if layer == 1:
            seen.update(queries=q.clone(), positions=positions.clone(), keys=k.clone())
        return selective_attention(q, k, v, positions, HFAdapter(tiny_llama(3)).scale)

    _blend(blend_at(0.0), attend=attend)
    question_start = len(PREFIX) + CHUNKS * CHUNK_TOKENS
    asking = seen["positions"] >= question_start
    scores = _reference_question_attention(
        seen["queries"][asking], seen["positions"][asking], seen["keys"]
    )
    chunk_positions = torch.arange(len(PREFIX), question_start)
    expected = chunk_positions[scores[chunk_positions].topk(15).indices].sort().values

    result, _ = _blend(blend_at(0.25, metric="probe"))
    chosen = result.recomputed_positions
    assert torch.equal(chosen[(chosen >= len(PREFIX)) & (chosen < question_start)], expected)


def test_tokens_the_probe_leaves_keep_their_cache_in_every_layer() -> None:
    probed, probed_layers = _blend(blend_at(0.25, metric="probe"))
    _, reused_layers = _blend(blend_at(0.0))
    left = torch.ones(probed_layers[0][0].shape[0], dtype=torch.bool)
    left[probed.recomputed_positions] = False
    for (k, v), (rk, rv) in zip(probed_layers, reused_layers, strict=True):
        torch.testing.assert_close(k[left], rk[left])
        torch.testing.assert_close(v[left], rv[left])


def test_without_a_question_the_probe_falls_back_to_v_deviation() -> None:
    model, ids, chunks, spans = _setup()
    no_question = ids[: -len(QUESTION)]
    results = [
        blend_prefill(
            HFAdapter(model),
            Prompt(no_question),
            placed_in(no_question, _placed(model, chunks, spans)),
            blend_at(0.25, metric=metric),
            LayerHooks(lambda _layer, _k, _v: None),
        )
        for metric in ("probe", "v")
    ]
    assert torch.equal(results[0].recomputed_positions, results[1].recomputed_positions)


def test_the_probe_at_ratio_one_is_the_full_prefill() -> None:
    model, ids, _, _ = _setup()
    _, layers = _blend(blend_at(1.0, metric="probe"))
    for (k, v), (rk, rv) in zip(layers, reference_kv(model, ids), strict=True):
        torch.testing.assert_close(k, rk, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v, rv, atol=1e-5, rtol=1e-4)
