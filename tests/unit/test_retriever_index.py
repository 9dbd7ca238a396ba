"""VectorIndex: nearest neighbours, filtering, removal, persistence and concurrent use."""

import threading

import numpy as np
import pytest

from retriever.search.index import VectorIndex

DIM = 32
KINDS = ["flat", "hnsw"]


def unit_vectors(count: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def filled(kind: str, count: int = 300) -> tuple[VectorIndex, np.ndarray]:
    index = VectorIndex(DIM, kind)
    vectors = unit_vectors(count)
    index.add(range(1000, 1000 + count), vectors)
    return index, vectors


def nudged(vector: np.ndarray) -> np.ndarray:
    noisy = vector + 0.05 * unit_vectors(1, seed=99)[0]
    return noisy / np.linalg.norm(noisy)


@pytest.mark.parametrize("kind", KINDS)
def test_search_returns_the_nearest_first(kind):
    index, vectors = filled(kind)
    hits = index.search(nudged(vectors[42]), k=5)
    assert hits[0][0] == 1042
    assert hits[0][1] > 0.95
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(index) == 300


@pytest.mark.parametrize("kind", KINDS)
def test_allowed_ids_restrict_results(kind):
    index, vectors = filled(kind)
    allowed = {1001, 1002, 1003}
    hits = index.search(vectors[42], k=10, allowed_ids=allowed)
    assert {chunk_id for chunk_id, _ in hits} == allowed
    assert index.search(vectors[42], k=10, allowed_ids={5}) == []
    assert index.search(vectors[42], k=10, allowed_ids=set()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_removed_ids_are_never_returned(kind):
    index, vectors = filled(kind)
    assert index.remove([1042, 1043, 7]) == 2
    assert len(index) == 298
    for query in (vectors[42], vectors[43]):
        returned = {chunk_id for chunk_id, _ in index.search(query, k=20)}
        assert returned.isdisjoint({1042, 1043})
    assert index.search(vectors[42], k=5, allowed_ids={1042}) == []
    assert index.remove([1042]) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_many_queries_at_once_find_what_each_finds_alone(kind):
    index, vectors = filled(kind)
    index.remove([1007])  # hnsw: a tombstone the batched search must skip too
    queries = np.stack([nudged(vectors[i]) for i in (3, 7, 42, 299)])
    together = index.search_many(queries, k=6)
    alone = [index.search(query, k=6) for query in queries]
    assert [[i for i, _ in row] for row in together] == [[i for i, _ in row] for row in alone]
    assert all(1007 not in {i for i, _ in row} for row in together)
    scores = [[s for _, s in row] for row in together]
    assert np.allclose(scores, [[s for _, s in row] for row in alone])
    assert index.search_many(queries[:1], k=0) == [[]]


@pytest.mark.parametrize("kind", KINDS)
def test_vectors_are_read_back_by_id_skipping_unknown_and_removed_ones(kind):
    index, vectors = filled(kind)
    index.remove([1005])
    found = index.vectors([1004, 1005, 99, 1004, 1010])
    assert list(found) == [1004, 1010]
    assert np.allclose(found[1004], vectors[4]) and np.allclose(found[1010], vectors[10])


def test_hnsw_refuses_to_reuse_a_removed_id():
    index, vectors = filled("hnsw", count=10)
    index.remove([1000])
    with pytest.raises(ValueError, match="already used"):
        index.add([1000], vectors[:1])


@pytest.mark.parametrize("kind", KINDS)
def test_add_rejects_duplicates_and_wrong_shapes(kind):
    index, vectors = filled(kind, count=10)
    with pytest.raises(ValueError, match="already used"):
        index.add([1005], vectors[:1])
    with pytest.raises(ValueError, match="unique"):
        index.add([1, 1], vectors[:2])
    with pytest.raises(ValueError, match="dim"):
        index.add([1], np.ones((1, DIM + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="dim"):
        index.search(np.ones(DIM + 1, dtype=np.float32), k=1)
    assert len(index) == 10


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load_round_trip(kind, tmp_path):
    index, vectors = filled(kind)
    index.remove([1042])
    path = tmp_path / "vectors.faiss"
    index.save(path)
    index.save(path)
    loaded = VectorIndex.load(path)
    assert (loaded.kind, loaded.dim, len(loaded)) == (kind, DIM, 299)
    assert loaded.ids() == index.ids()
    for row in (7, 42, 250):
        assert loaded.search(vectors[row], k=3) == index.search(vectors[row], k=3)
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.faiss"]


def test_failed_save_keeps_the_previous_file(tmp_path, monkeypatch):
    index, _ = filled("flat", count=10)
    path = tmp_path / "vectors.faiss"
    index.save(path)
    index.add([1], unit_vectors(1, seed=5))

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        index.save(path)
    assert len(VectorIndex.load(path)) == 10
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.faiss"]


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_adds_and_searches(kind):
    index = VectorIndex(DIM, kind)
    vectors = unit_vectors(400)
    errors: list[BaseException] = []

    def writer(part: int) -> None:
        try:
            for start in range(part * 100, part * 100 + 100, 10):
                index.add(range(start, start + 10), vectors[start : start + 10])
                index.search(vectors[start], k=3)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(part,)) for part in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(index) == 400
    assert index.search(vectors[123], k=1)[0][0] == 123


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown index kind"):
        VectorIndex(DIM, "ivf")  # type: ignore[arg-type]


def test_hnsw_filter_above_the_exact_limit_uses_the_graph(monkeypatch):
    monkeypatch.setattr("retriever.search.index.EXACT_FILTER_LIMIT", 0)
    index, vectors = filled("hnsw")
    index.remove([1010])
    allowed = set(range(1000, 1100))
    hits = index.search(vectors[10], k=5, allowed_ids=allowed)
    assert len(hits) == 5
    assert {chunk_id for chunk_id, _ in hits} <= allowed - {1010}
