"""Embedding calls waiting for the model are answered together: one pass for several small calls,
each caller getting its own vectors, and a failed pass failing every call it took."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from retriever.search.embed import Embedder, similar_length_batches
from retriever.search.embed_combining import CallCombiner


class _Model:
    """Encodes each text as [its length, 1] and records every pass."""

    def __init__(self) -> None:
        self.passes: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.passes.append(texts)
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)


def test_calls_waiting_together_share_one_pass() -> None:
    combiner, model = CallCombiner(max_texts=8), _Model()
    first, second, third = (combiner.join(texts) for texts in (["a"], ["bb", "ccc"], ["dddd"]))
    combiner.answer(first, model)
    combiner.answer(second, model)
    combiner.answer(third, model)
    assert model.passes == [["a", "bb", "ccc", "dddd"]]
    assert second.vectors is not None and second.vectors[:, 0].tolist() == [2, 3]
    assert third.vectors is not None and third.vectors[:, 0].tolist() == [4]


def test_a_pass_takes_no_more_than_its_batch() -> None:
    combiner, model = CallCombiner(max_texts=3), _Model()
    calls = [combiner.join(texts) for texts in (["a", "b"], ["c"], ["d", "e"])]
    for call in calls:
        combiner.answer(call, model)
    assert model.passes == [["a", "b", "c"], ["d", "e"]]


def test_a_failed_pass_fails_every_call_it_took() -> None:
    combiner = CallCombiner(max_texts=8)
    first, second = combiner.join(["a"]), combiner.join(["b"])

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model failed")

    with pytest.raises(RuntimeError):
        combiner.answer(first, broken)
    assert isinstance(second.error, RuntimeError)


def test_concurrent_callers_get_their_own_embeddings() -> None:
    embedder = Embedder()
    texts = [f"Sentence number {number} is about topic {number % 3}." for number in range(24)]
    expected = embedder.embed(texts)
    results: dict[int, np.ndarray] = {}

    def embed(number: int) -> None:
        results[number] = embedder.embed(texts[number : number + 2])

    threads = [threading.Thread(target=embed, args=(number,)) for number in range(0, 24, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for number, vectors in results.items():
        assert np.allclose(vectors, expected[number : number + 2], atol=1e-5)


def test_short_texts_are_not_padded_to_long_ones() -> None:
    # Four uploads combined: each a long chunk and a short last one.
    lengths = [1900, 600, 2000, 700, 1800, 650, 1950, 620]
    batches = similar_length_batches(lengths, batch_size=32)
    assert batches == [[2, 6, 0, 4], [3, 5, 7, 1]]
    assert similar_length_batches([100] * 5, batch_size=2) == [[0, 1], [2, 3], [4]]
    assert sorted(p for batch in similar_length_batches(lengths, 3) for p in batch) == list(
        range(8)
    )


def test_mixed_lengths_embed_as_each_text_alone() -> None:
    embedder = Embedder()
    texts = ["A short query?", " ".join(["a long passage about rivers and their deltas"] * 30)]
    together = embedder.embed(texts)
    alone = np.concatenate([embedder.embed([text]) for text in texts])
    assert np.allclose(together, alone, atol=1e-5)
