"""Token selection with the heads split across tensor-parallel ranks.

Each rank scores tokens over its own heads only. The ranks below are threads whose ``HeadSum``
adds the partial sums of all of them (what vLLM's all-reduce does across processes): every
rank must then select exactly what one process holding every head selects, while ranks that
ranked their own partial scores would disagree (and hang a real split model's collectives).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch import Tensor

from engine.blend.check import CheckLayer, rows_to_keep
from engine.blend.fuse import CachedChunk, LayerHooks, Prompt, blend_prefill
from engine.blend.select import kv_deviation, local_heads_only, question_attention, select_top
from engine.contract import Metric, Recipe
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import blend_at, placed_in, tiny_llama


class ThreadRanks:
    """``world_size`` threads that sum tensors across each other, like an all-reduce."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self._parts: list[Tensor | None] = [None] * world_size
        self._barrier = threading.Barrier(world_size)

    def sum_heads_of(self, rank: int) -> Callable[[Tensor], Tensor]:
        def sum_heads(partial: Tensor) -> Tensor:
            self._parts[rank] = partial
            self._barrier.wait()
            total = torch.stack([p for p in self._parts if p is not None]).sum(dim=0)
            self._barrier.wait()  # nobody overwrites a part before everyone has summed
            return total

        return sum_heads

    def run(self, work: Callable[[int, Callable[[Tensor], Tensor]], Tensor]) -> list[Tensor]:
        with ThreadPoolExecutor(self.world_size) as pool:
            futures = [
                pool.submit(work, rank, self.sum_heads_of(rank)) for rank in range(self.world_size)
            ]
            return [future.result(timeout=30) for future in futures]


def _kv(seed: int, tokens: int = 40, heads: int = 4, dim: int = 8) -> Tensor:
    return torch.randn(tokens, heads, dim, generator=torch.Generator().manual_seed(seed))


def _heads(tensor: Tensor, rank: int, world_size: int) -> Tensor:
    share = tensor.shape[1] // world_size
    return tensor[:, rank * share : (rank + 1) * share]


NONE = torch.empty(0, dtype=torch.long)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("metric", ["k", "v", "kv"])
def test_deviation_is_summed_over_every_ranks_heads_before_the_top_k(
    metric: Metric, normalize: bool
) -> None:
    tensors = [_kv(seed) for seed in range(4)]  # fresh K, fresh V, cached K, cached V
    whole = kv_deviation(*tensors, metric, normalize)
    chosen = select_top(whole, torch.arange(40), 0.25, NONE).tolist()

    def rank_scores(rank: int, sum_heads: Callable[[Tensor], Tensor]) -> Tensor:
        return kv_deviation(*[_heads(t, rank, 2) for t in tensors], metric, normalize, sum_heads)

    for scores in ThreadRanks(2).run(rank_scores):
        torch.testing.assert_close(scores, whole)
        assert select_top(scores, torch.arange(40), 0.25, NONE).tolist() == chosen
    alone = [rank_scores(rank, local_heads_only) for rank in range(2)]
    picks = [select_top(scores, torch.arange(40), 0.25, NONE).tolist() for scores in alone]
    assert picks[0] != picks[1]  # the data would split unreduced ranks apart


def test_question_attention_is_summed_over_every_ranks_heads() -> None:
    generator = torch.Generator().manual_seed(5)
    keys = torch.randn(12, 2, 8, generator=generator)
    queries = torch.randn(3, 4, 8, generator=generator)  # query heads 0-1 read KV head 0
    positions = torch.tensor([9, 10, 11])
    whole = question_attention(queries, positions, keys, 0.35)

    def rank_scores(rank: int, sum_heads: Callable[[Tensor], Tensor]) -> Tensor:
        return question_attention(
            _heads(queries, rank, 2), positions, _heads(keys, rank, 2), 0.35, sum_heads
        )

    for scores in ThreadRanks(2).run(rank_scores):
        torch.testing.assert_close(scores, whole)


@pytest.mark.parametrize(
    "selection",
    [blend_at(0.2, metric="qv", question_pool=2.0), blend_at(0.2, budget_mass=0.6)],
)
def test_two_stage_and_adaptive_picks_are_the_same_on_every_rank(selection: Recipe) -> None:
    generator = torch.Generator().manual_seed(6)
    queries = torch.randn(40, 4, 8, generator=generator)
    kv = [torch.randn(40, 2, 8, generator=generator) for _ in range(5)]
    is_cached = torch.arange(40) < 34  # the last 6 tokens are the question

    def check(rank: int, world_size: int, sum_heads: Callable[[Tensor], Tensor]) -> CheckLayer:
        fresh_k, fresh_v, cached_k, cached_v, keys = (_heads(t, rank, world_size) for t in kv)
        return CheckLayer(
            _heads(queries, rank, world_size),
            torch.arange(40),
            (fresh_k, fresh_v),
            (cached_k, cached_v),
            keys,
            6,  # positions 34..39 are the question
            0.35,
            sum_heads,
        )

    whole = rows_to_keep(check(0, 1, local_heads_only), is_cached, 7, selection).tolist()

    def rank_rows(rank: int, sum_heads: Callable[[Tensor], Tensor]) -> Tensor:
        return rows_to_keep(check(rank, 2, sum_heads), is_cached, 7, selection)

    for rows in ThreadRanks(2).run(rank_rows):
        assert rows.tolist() == whole


def test_the_blend_ranks_reduced_scores_not_its_own() -> None:
    """What the other ranks add decides the selection: a large share elsewhere wins."""
    model = tiny_llama()
    token_ids = torch.randint(2, 128, (41,), generator=torch.Generator().manual_seed(8))
    chunk_layers = [(k[1:], v[1:]) for k, v in _layers(model, token_ids[:41])]
    other_ranks = torch.zeros(41)
    favoured = [3, 17, 30, 38]
    other_ranks[favoured] = 1e6

    def blend(sum_heads: Callable[[Tensor], Tensor]) -> list[int]:
        chunk = CachedChunk(1, 41, 0, iter(chunk_layers))
        selection = blend_at(0.1, check_layers=((0, 1.0),))
        result = blend_prefill(
            HFAdapter(model),
            Prompt(token_ids, question_start=41),
            placed_in(token_ids, [chunk]),
            selection,
            LayerHooks(_ignore),
            sum_heads=sum_heads,
        )
        return [p for p in result.recomputed_positions.tolist() if p != 0]  # 0: uncached

    assert blend(lambda partial: partial + other_ranks) == favoured
    assert blend(local_heads_only) != favoured


def _layers(model: torch.nn.Module, token_ids: Tensor) -> list[tuple[Tensor, Tensor]]:
    layers: list[tuple[Tensor, Tensor]] = []
    blend_prefill(
        HFAdapter(model),
        Prompt(token_ids),
        None,
        blend_at(1.0),
        LayerHooks(lambda _layer, k, v: layers.append((k.clone(), v.clone()))),
    )
    return layers


def _ignore(_layer: int, _keys: Tensor, _values: Tensor) -> None:
    return
