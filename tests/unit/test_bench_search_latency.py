"""The search-latency benchmark's stand-in chunks and vectors, and its percentiles."""

import numpy as np
import pytest

from load_tests.bench_search_latency import (
    PseudoRandomVectors,
    chunk_texts,
    library_folder,
    percentiles,
)


def test_chunk_texts_are_distinct_draws_of_whole_sentences():
    sentences = [f"Sentence number {n} is here." for n in range(10)]
    texts = chunk_texts(sentences, count=50, per_chunk=3, seed=0)
    assert len(set(texts)) == 50
    assert all(text.count("Sentence number") == 3 for text in texts)
    assert chunk_texts(sentences, 50, 3, seed=0) == texts  # the seed fixes them


def test_vectors_are_unit_length_and_fixed_by_the_text():
    vectors = PseudoRandomVectors(16)
    first = vectors.embed(["a", "b", "a"])
    assert first.shape == (3, 16) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(first[0], first[2]) and not np.array_equal(first[0], first[1])


def test_percentiles_in_milliseconds():
    seconds = [n / 1000 for n in range(1, 101)]  # 1..100 ms
    result = percentiles(seconds)
    assert result["p50_ms"] == pytest.approx(50.5)
    assert result["p95_ms"] == pytest.approx(95.05)


def test_libraries_are_kept_per_size_when_asked_else_removed(tmp_path):
    with library_folder(str(tmp_path), 100) as folder:
        assert folder == tmp_path / "100"
    with library_folder(None, 100) as folder:
        (folder / "documents.sqlite3").write_text("")
    assert not folder.exists()
