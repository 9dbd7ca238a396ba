"""The blend's layer loop issues as many operations for two chunks as for six.

On a GPU each operation is a kernel launch, and a small model's blend is bound by them (issue
41): the cached layers are placed and re-rotated with one operation per layer for all chunks,
not one per chunk. Counted on the CPU (``load_tests.count_blend_ops``): the operations a layer
adds are what a four-layer model issues beyond a two-layer one.
"""

from __future__ import annotations

import pytest
import torch

from engine.blend.fuse import CachedChunk, LayerHooks, Prompt, blend_prefill
from engine.contract import METRICS
from load_tests.count_blend_ops import OpCounter
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import HEAD_DIM, KV_HEADS, blend_at, placed_in, tiny_llama

CHUNK_TOKENS = 48
"""Split among the chunks: the prompt is as long whatever their count."""


def _operations_a_layer(chunks: int, metric: str) -> float:
    generator = torch.Generator().manual_seed(chunks)
    size = CHUNK_TOKENS // chunks
    ids = torch.tensor([1, *range(10, 10 + CHUNK_TOKENS), 9, 8, 7, 6])
    counts = {}
    for layers in (2, 4):
        model = tiny_llama()
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
        stored = [
            [tuple(torch.randn(size, KV_HEADS, HEAD_DIM, generator=generator) for _ in "kv")
             for _ in range(layers)]
            for _ in range(chunks)
        ]  # fmt: skip
        placed = [
            CachedChunk(1 + index * size, 1 + (index + 1) * size, 1, iter(chunk_layers))
            for index, chunk_layers in enumerate(stored)
        ]
        counter, recipe = OpCounter(), blend_at(0.25, metric=metric)
        dropped = LayerHooks(lambda *_: None)
        with torch.inference_mode(), counter:
            cached = placed_in(ids, placed)
            blend_prefill(HFAdapter(model), Prompt(ids), cached, recipe, dropped)
        counts[layers] = sum(counter.counts.values())
    return (counts[4] - counts[2]) / 2


@pytest.mark.parametrize("metric", METRICS)
def test_a_layer_issues_as_many_operations_for_six_chunks_as_for_two(metric: str) -> None:
    assert _operations_a_layer(6, metric) == _operations_a_layer(2, metric) > 0
