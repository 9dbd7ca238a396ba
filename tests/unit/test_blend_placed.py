"""The cached chunks placed layer by layer, against a plain loop over the chunks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from engine.blend.fuse import CachedChunk, LayerHooks, PlacedChunks, Prompt, blend_prefill
from engine.blend.rope import rotate_keys
from load_tests.hf_decoder import HFAdapter
from tests.unit.tiny_llama import HEAD_DIM, KV_HEADS, LAYERS, blend_at, rope_spec, tiny_llama

NUM_TOKENS = 60
SPANS = [(30, 42), (3, 20), (45, 46)]  # not in prompt order, gaps between them
SOURCE_STARTS = [1, 1, 7]
Layers = list[tuple[Tensor, Tensor]]


class Counted:
    """A chunk's layers, counting how many were read."""

    def __init__(self, layers: Layers) -> None:
        self.layers, self.read = layers, 0

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        return self

    def __next__(self) -> tuple[Tensor, Tensor]:
        if self.read == len(self.layers):
            raise StopIteration
        self.read += 1
        return self.layers[self.read - 1]


def _stored(seed: int = 0, layers: int = LAYERS) -> list[Layers]:
    generator = torch.Generator().manual_seed(seed)
    return [
        [
            tuple(torch.randn(end - start, KV_HEADS, HEAD_DIM, generator=generator) for _ in "kv")
            for _ in range(layers)
        ]
        for start, end in SPANS
    ]


def _chunks(stored: list[Layers]) -> list[CachedChunk]:
    return [
        CachedChunk(start, end, source, Counted(layers))
        for (start, end), source, layers in zip(SPANS, SOURCE_STARTS, stored, strict=True)
    ]


def _reference(stored: list[Layers], layer: int) -> tuple[Tensor, Tensor]:
    """One chunk at a time: keys moved by their own delta, written at their rows."""
    keys = torch.zeros(NUM_TOKENS, KV_HEADS, HEAD_DIM)
    values = torch.zeros_like(keys)
    for (start, end), source, layers in zip(SPANS, SOURCE_STARTS, stored, strict=True):
        k, v = layers[layer]
        keys[start:end] = rotate_keys(k, start - source, rope_spec())
        values[start:end] = v
    return keys, values


def _placed(chunks: list[CachedChunk]) -> PlacedChunks:
    return PlacedChunks(chunks, rope_spec(), NUM_TOKENS, torch.device("cpu"))


def _reads(chunks: list[CachedChunk]) -> list[int]:
    """How many layers of each chunk were read."""
    return [chunk.layers.read for chunk in chunks]  # type: ignore[attr-defined]


LIKE = torch.empty(1, KV_HEADS, HEAD_DIM)


def test_every_layer_is_every_chunk_moved_to_its_rows() -> None:
    stored = _stored()
    placed = _placed(_chunks(stored))
    assert len(placed) == 3 and placed.num_chunk_tokens == 12 + 17 + 1
    for layer in range(LAYERS):
        keys, values = placed.layer(layer, LIKE)
        reference_keys, reference_values = _reference(stored, layer)
        torch.testing.assert_close(keys, reference_keys, atol=1e-6, rtol=1e-6)
        assert torch.equal(values, reference_values)


def test_layers_take_the_dtype_of_the_fresh_keys() -> None:
    keys, values = _placed(_chunks(_stored())).layer(0, LIKE.bfloat16())
    assert keys.dtype == values.dtype == torch.bfloat16
    assert keys.shape == (NUM_TOKENS, KV_HEADS, HEAD_DIM)


def test_kept_layers_are_handed_out_again_and_each_chunk_layer_is_read_once() -> None:
    stored = _stored()
    chunks = _chunks(stored)
    placed = _placed(chunks)
    probed = [placed.layer(layer, LIKE, keep=True) for layer in range(2)]
    probed[0][0].fill_(7.0)  # the caller's to change: the held layer is not
    again = placed.layer(1, LIKE, keep=True)
    torch.testing.assert_close(again, probed[1], atol=0, rtol=0)
    for layer in range(LAYERS):
        torch.testing.assert_close(
            placed.layer(layer, LIKE), _reference(stored, layer), atol=1e-6, rtol=1e-6
        )
    assert _reads(chunks) == [LAYERS] * 3


@pytest.mark.parametrize(("first", "then"), [([], 1), ([0], 0), ([0], 2)])
def test_layers_are_read_in_order_and_once(first: list[int], then: int) -> None:
    placed = _placed(_chunks(_stored()))
    for layer in first:
        placed.layer(layer, LIKE)
    with pytest.raises(ValueError, match="read once, in order"):
        placed.layer(then, LIKE)


def test_no_chunks_give_zeros_and_bad_placements_are_refused() -> None:
    empty = PlacedChunks([], None, 5, torch.device("cpu"))
    keys, values = empty.layer(0, LIKE)
    assert not empty and not keys.any() and not values.any() and keys.shape[0] == 5
    chunk = _chunks(_stored())[0]
    with pytest.raises(ValueError, match="RoPE"):
        PlacedChunks([chunk], None, NUM_TOKENS, torch.device("cpu"))
    with pytest.raises(ValueError, match="lie in"):
        PlacedChunks([chunk], rope_spec(), 35, torch.device("cpu"))
    with pytest.raises(ValueError, match="overlap"):
        PlacedChunks(
            [chunk, CachedChunk(40, 50, 0, iter([]))], rope_spec(), 60, torch.device("cpu")
        )


@pytest.mark.parametrize("metric", ["probe", "v"])
def test_a_blend_reads_each_chunk_layer_once(metric: str) -> None:
    """The probe's layers are handed to the blend again, not read from the store twice."""
    model = tiny_llama()
    chunks = _chunks(_stored())
    placed = _placed(chunks)
    ids = torch.randint(2, 128, (NUM_TOKENS,), generator=torch.Generator().manual_seed(1))
    blend_prefill(
        HFAdapter(model), Prompt(ids), placed, blend_at(0.25, metric=metric),
        LayerHooks(lambda *_: None),
    )  # fmt: skip
    assert _reads(chunks) == [LAYERS] * 3


CUDA = torch.device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("source", ["pageable", "pinned", "device"])
def test_on_cuda_layers_copied_ahead_match_the_cpu(source: str) -> None:
    stored = _stored()
    moved = {
        "pageable": lambda t: t,
        "pinned": lambda t: t.pin_memory(),
        "device": lambda t: t.to(CUDA),
    }[source]
    on_cuda = [[(moved(k), moved(v)) for k, v in layers] for layers in stored]
    chunks = _chunks(on_cuda)
    placed = PlacedChunks(chunks, rope_spec(), NUM_TOKENS, CUDA)
    assert _reads(chunks) == [1] * 3  # the first layer is on its way already
    like = LIKE.to(CUDA)
    probed = placed.layer(0, like, keep=True)
    for layer in range(LAYERS):
        keys, values = placed.layer(layer, like)
        assert keys.is_cuda and values.is_cuda
        reference_keys, reference_values = _reference(stored, layer)
        torch.testing.assert_close(keys.cpu(), reference_keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(values.cpu(), reference_values, atol=0, rtol=0)
        if layer == 0:
            torch.testing.assert_close(probed[0].cpu(), keys.cpu(), atol=0, rtol=0)
