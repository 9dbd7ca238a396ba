"""The blended prefill on a tiny Llama built in code, against a plain Hugging Face prefill."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from engine.blend.fuse import BlendResult, CachedChunk, LayerHooks, Prompt, blend_prefill
from engine.contract import Metric
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import blend_at, placed_in, reference_kv, tiny_llama

PREFIX = [1]


def _collect(
    model, token_ids: Tensor, chunks: list[CachedChunk], ratio: float
) -> tuple[list[tuple[Tensor, Tensor]], BlendResult]:
    layers: list[tuple[Tensor, Tensor]] = []
    result = blend_prefill(
        HFAdapter(model),
        Prompt(token_ids),
        placed_in(token_ids, chunks),
        blend_at(ratio),
        LayerHooks(lambda _layer, k, v: layers.append((k.clone(), v.clone()))),
    )
    return layers, result


def _precompute(model, chunk: list[int]) -> list[tuple[Tensor, Tensor]]:
    """A chunk computed alone behind the fixed prefix, prefix rows dropped."""
    layers, _ = _collect(model, torch.tensor(PREFIX + chunk), [], ratio=1.0)
    return [(k[len(PREFIX) :], v[len(PREFIX) :]) for k, v in layers]


def _prompt(chunks: list[list[int]], question: list[int]):
    """Token ids with the chunks placed after the prefix, and their spans."""
    ids, spans = list(PREFIX), []
    for chunk in chunks:
        spans.append((len(ids), len(ids) + len(chunk)))
        ids += chunk
    return torch.tensor(ids + question), spans


def _placed(model, chunks: list[list[int]], spans) -> list[CachedChunk]:
    return [
        CachedChunk(start, end, len(PREFIX), iter(_precompute(model, chunk)))
        for chunk, (start, end) in zip(chunks, spans, strict=True)
    ]


def _relative_error(layers, reference) -> float:
    errors = [
        (torch.cat([k, v]) - torch.cat([rk, rv])).norm() / torch.cat([rk, rv]).norm()
        for (k, v), (rk, rv) in zip(layers, reference, strict=True)
    ]
    return float(torch.stack(errors).mean())


def _random_chunks(count: int, length: int, seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 128, (length,), generator=generator).tolist() for _ in range(count)]


def test_full_compute_matches_the_reference_prefill() -> None:
    model = tiny_llama()
    ids = torch.randint(2, 128, (50,))
    layers, result = _collect(model, ids, [], ratio=1.0)
    for (k, v), (rk, rv) in zip(layers, reference_kv(model, ids), strict=True):
        torch.testing.assert_close(k, rk, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v, rv, atol=1e-5, rtol=1e-4)
    assert result.recomputed_tokens == 50


@pytest.mark.parametrize("metric", ["probe", "v"])
def test_a_first_sighting_computes_every_token_exactly_whatever_the_recipe(metric: Metric) -> None:
    """No cached chunk (every chunk missed): nothing to choose, a full prefill at any ratio."""
    model = tiny_llama()
    ids = torch.randint(2, 128, (40,))
    layers: list[tuple[Tensor, Tensor]] = []
    result = blend_prefill(
        HFAdapter(model), Prompt(ids, question_start=30), None, blend_at(0.15, metric=metric),
        LayerHooks(lambda _layer, k, v: layers.append((k.clone(), v.clone()))),
    )  # fmt: skip
    for (k, v), (rk, rv) in zip(layers, reference_kv(model, ids), strict=True):
        torch.testing.assert_close(k, rk, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v, rv, atol=1e-5, rtol=1e-4)
    assert result.recomputed_tokens == 40


def test_ratio_one_with_cached_chunks_gives_the_full_prefill_kv() -> None:
    model = tiny_llama()
    chunks = _random_chunks(3, 20, seed=1)
    ids, spans = _prompt(chunks, question=[5, 6, 7])
    layers, _ = _collect(model, ids[:-3], _placed(model, chunks, spans), ratio=1.0)
    reference = reference_kv(model, ids)
    assert _relative_error(layers, [(k[:-3], v[:-3]) for k, v in reference]) < 1e-5


def test_first_chunk_behind_the_same_prefix_is_reused_exactly() -> None:
    model = tiny_llama()
    chunks = _random_chunks(1, 30, seed=2)
    ids, spans = _prompt(chunks, question=[])
    layers, result = _collect(model, ids, _placed(model, chunks, spans), ratio=0.0)
    assert _relative_error(layers, reference_kv(model, ids)) < 1e-5
    assert result.reused_tokens == 30


def test_moved_chunk_keys_are_re_rotated_to_their_new_position() -> None:
    model = tiny_llama()
    chunks = _random_chunks(3, 25, seed=3)
    ids, spans = _prompt(chunks, question=[])
    layers, _ = _collect(model, ids, _placed(model, chunks, spans), ratio=0.0)
    # Layer-0 K/V depend only on token and position, so re-rotated caches must match exactly.
    (k0, v0), (rk0, rv0) = layers[0], reference_kv(model, ids)[0]
    torch.testing.assert_close(k0, rk0, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(v0, rv0, atol=1e-5, rtol=1e-4)


def test_selective_recompute_lands_between_reuse_and_full() -> None:
    model = tiny_llama()
    chunks = _random_chunks(4, 30, seed=4)
    ids, spans = _prompt(chunks, question=[])
    reference = reference_kv(model, ids)
    errors = {}
    for ratio in (0.0, 0.15, 0.5):
        layers, result = _collect(model, ids, _placed(model, chunks, spans), ratio)
        errors[ratio] = _relative_error(layers, reference)
        expected_recompute = len(PREFIX) + round(ratio * 120)
        assert result.recomputed_tokens == expected_recompute
    assert errors[0.5] < errors[0.15] < errors[0.0]


def test_reordered_chunks_reuse_the_same_caches() -> None:
    model = tiny_llama()
    chunks = _random_chunks(3, 20, seed=5)
    reordered = [chunks[2], chunks[0], chunks[1]]
    ids, spans = _prompt(reordered, question=[])
    layers, result = _collect(model, ids, _placed(model, reordered, spans), ratio=1.0)
    assert _relative_error(layers, reference_kv(model, ids)) < 1e-5
    assert result.recomputed_tokens == len(ids)


def test_uncached_gap_tokens_are_always_recomputed() -> None:
    model = tiny_llama()
    chunks = _random_chunks(2, 20, seed=6)
    ids, spans = _prompt(chunks, question=[9, 9, 9, 9])
    only_first = _placed(model, chunks[:1], spans[:1])
    _, result = _collect(model, ids, only_first, ratio=0.0)
    assert result.reused_tokens == 20
    assert result.recomputed_tokens == len(ids) - 20


@pytest.mark.parametrize(("ratio", "recomputed_chunk_tokens"), [(0.5, 30), (0.1, 3 * 4)])
def test_chunk_heads_are_always_recomputed_within_the_ratio(
    ratio: float, recomputed_chunk_tokens: int
) -> None:
    model = tiny_llama()
    chunks = _random_chunks(3, 20, seed=7)
    ids, spans = _prompt(chunks, question=[])
    result = blend_prefill(
        HFAdapter(model),
        Prompt(ids),
        placed_in(ids, _placed(model, chunks, spans)),
        blend_at(ratio, chunk_head_tokens=4),
        LayerHooks(lambda _layer, _k, _v: None),
    )
    heads = torch.cat([torch.arange(span[0], span[0] + 4) for span in spans])
    assert torch.isin(heads, result.recomputed_positions).all()
    # Half of the 60 chunk tokens, heads included; at 0.1 the heads alone exceed the budget.
    assert result.recomputed_tokens == len(PREFIX) + recomputed_chunk_tokens


def _blend_by_attention(
    question: list[int], ratio: float, metric: Metric = "attn", **selection: Any
) -> BlendResult:
    model = tiny_llama()
    chunks = _random_chunks(3, 20, seed=8)
    ids, spans = _prompt(chunks, question=question)
    return blend_prefill(
        HFAdapter(model),
        Prompt(ids),
        placed_in(ids, _placed(model, chunks, spans)),
        blend_at(ratio, metric=metric, **selection),
        LayerHooks(lambda _layer, _k, _v: None),
    )


@pytest.mark.parametrize("metric", ["attn", "qv"])
def test_selection_by_question_attention_recomputes_the_question_and_the_ratio(
    metric: Metric,
) -> None:
    result = _blend_by_attention(question=[9, 8, 7, 6], ratio=0.25, metric=metric)
    question = torch.arange(len(PREFIX) + 60, len(PREFIX) + 64)
    assert torch.isin(question, result.recomputed_positions).all()
    assert result.recomputed_tokens == len(PREFIX) + 15 + 4


@pytest.mark.parametrize("metric", ["attn", "qv"])
def test_selection_by_question_attention_without_a_question_falls_back_to_v_deviation(
    metric: Metric,
) -> None:
    by_attention = _blend_by_attention(question=[], ratio=0.25, metric=metric)
    by_v = _blend_by_attention(question=[], ratio=0.25, metric="v")
    assert torch.equal(by_attention.recomputed_positions, by_v.recomputed_positions)


def test_two_stage_selection_narrows_v_deviation_to_what_the_question_reads() -> None:
    question = [9, 8, 7, 6]
    by_v = _blend_by_attention(question, 0.1, "v").recomputed_positions
    wide_pool = _blend_by_attention(question, 0.1, "qv", question_pool=100.0)
    assert torch.equal(wide_pool.recomputed_positions, by_v)  # the pool held every token
    # A pool of exactly what is kept: the question's attention alone decides.
    single = ((1, 1.0),)
    by_attention = _blend_by_attention(question, 0.1, "attn", check_layers=single)
    narrow = _blend_by_attention(question, 0.1, "qv", question_pool=1.0, check_layers=single)
    assert torch.equal(narrow.recomputed_positions, by_attention.recomputed_positions)


def test_an_adaptive_budget_recomputes_at_most_the_ratio_and_less_for_a_low_mass() -> None:
    question = [9, 8, 7, 6]
    fixed = _blend_by_attention(question, 0.25, "v").recomputed_tokens
    whole_mass = _blend_by_attention(question, 0.25, "v", budget_mass=1.0).recomputed_tokens
    half = _blend_by_attention(question, 0.25, "v", budget_mass=0.5).recomputed_tokens
    tiny = _blend_by_attention(question, 0.25, "v", budget_mass=1e-6).recomputed_tokens
    assert whole_mass == fixed == len(PREFIX) + 15 + 4
    assert len(PREFIX) + 1 + 4 == tiny < half < fixed  # the top token alone holds a tiny mass


@pytest.mark.parametrize("selection", [{"metric": "qv"}, {"budget_mass": 0.3}])
def test_ratio_one_is_the_full_prefill_whatever_the_strategy(selection: dict) -> None:
    model = tiny_llama()
    chunks = _random_chunks(3, 20, seed=11)
    ids, spans = _prompt(chunks, question=[5, 6, 7])
    layers: list[tuple[Tensor, Tensor]] = []
    blend_prefill(
        HFAdapter(model),
        Prompt(ids),
        placed_in(ids, _placed(model, chunks, spans)),
        blend_at(1.0, **selection),
        LayerHooks(lambda _layer, k, v: layers.append((k.clone(), v.clone()))),
    )
    assert _relative_error(layers, reference_kv(model, ids)) < 1e-5


def _blend_after_settled(
    chunks: list[list[int]], question: list[int], ratio: float, settled_span: int
) -> tuple[Tensor, BlendResult, list[tuple[Tensor, Tensor]], dict[int, tuple[Tensor, Tensor]]]:
    """Blend with the positions before chunk ``settled_span`` already in a fake paged cache
    (holding the full prefill's K/V there); attention reads that cache like vLLM's kernel."""
    from engine.blend.attention import selective_attention

    model = tiny_llama()
    ids, spans = _prompt(chunks, question=question)
    reference, _ = _collect(model, ids, [], ratio=1.0)  # nothing cached: the full prefill
    settled = spans[settled_span][0]
    adapter = HFAdapter(model)
    paged: dict[int, tuple[Tensor, Tensor]] = {}

    def write(layer: int, keys: Tensor, values: Tensor) -> None:
        exact_keys, exact_values = reference[layer]
        paged[layer] = (
            torch.cat((exact_keys[:settled], keys[settled:])),
            torch.cat((exact_values[:settled], values[settled:])),
        )

    def attend(layer: int, q: Tensor, _k: Tensor, _v: Tensor, positions: Tensor) -> Tensor:
        return selective_attention(q, *paged[layer], positions, adapter.scale)

    placed = _placed(model, chunks, spans)
    result = blend_prefill(
        adapter, Prompt(ids, settled=settled), placed_in(ids, placed), blend_at(ratio),
        LayerHooks(write, attend),
    )  # fmt: skip
    return ids, result, reference, paged


def test_settled_positions_are_read_from_the_cache_not_recomputed() -> None:
    chunks = _random_chunks(3, 20, seed=9)
    ids, result, reference, paged = _blend_after_settled(chunks, [5, 6, 7], 1.0, settled_span=1)
    settled = len(PREFIX) + 20
    assert int(result.recomputed_positions.min()) == settled
    assert result.recomputed_tokens == len(ids) - settled
    for layer, (keys, values) in enumerate(reference):
        assert torch.allclose(paged[layer][0], keys, atol=1e-4)
        assert torch.allclose(paged[layer][1], values, atol=1e-4)


def test_reuse_of_a_region_holding_only_cached_chunks_after_the_settled_start() -> None:
    # The prefix came from the prefix cache; only cached chunks remain to place.
    chunks = _random_chunks(2, 10, seed=10)
    ids, result, reference, paged = _blend_after_settled(chunks, [], 0.0, settled_span=0)
    assert result.recomputed_positions.tolist() == [len(ids) - 1]
    assert len(paged) == len(reference)
