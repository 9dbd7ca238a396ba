"""Inner-product vector index over FAISS with caller-chosen int64 ids.

Vectors are expected L2-normalized, so scores are cosine similarities. "flat" is exact; "hnsw" is
approximate and cannot delete, so removed ids become tombstones that searches skip (they still use
memory until the index is rebuilt, and a removed id cannot be added again).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Literal

import faiss
import numpy as np

from retriever.search.index_file import read_index_file, write_index_file

IndexKind = Literal["flat", "hnsw"]
HNSW_NEIGHBORS = 32
HNSW_SEARCH_DEPTH = 64
# With an HNSW index, filters this small are scored exactly over their own vectors, because a
# graph walk that skips most nodes can miss the few allowed ones.
EXACT_FILTER_LIMIT = 4096


class VectorIndex:
    """Thread-safe id -> vector index; `search` returns (id, score) pairs, best first."""

    def __init__(self, dim: int, kind: IndexKind = "flat") -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        if kind == "flat":
            inner: faiss.Index = faiss.IndexFlatIP(dim)
        elif kind == "hnsw":
            inner = faiss.IndexHNSWFlat(dim, HNSW_NEIGHBORS, faiss.METRIC_INNER_PRODUCT)
        else:
            raise ValueError(f"unknown index kind {kind!r}; use 'flat' or 'hnsw'")
        self.dim = dim
        self.kind: IndexKind = kind
        self._index = faiss.IndexIDMap2(inner)
        self._ids: set[int] = set()
        self._tombstones: set[int] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    def ids(self) -> set[int]:
        """Ids currently searchable."""
        with self._lock:
            return set(self._ids)

    def add(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        """Add one vector per id; ids must be new (and, for HNSW, never removed before)."""
        id_array = np.asarray(list(ids), dtype=np.int64)
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape != (len(id_array), self.dim):
            raise ValueError(
                f"expected {len(id_array)} vectors of dim {self.dim}, got {matrix.shape}"
            )
        new_ids = set(id_array.tolist())
        if len(new_ids) != len(id_array):
            raise ValueError("ids must be unique")
        with self._lock:
            taken = new_ids & (self._ids | self._tombstones)
            if taken:
                raise ValueError(f"ids already used in this index: {sorted(taken)[:10]}")
            if len(id_array):
                self._index.add_with_ids(matrix, id_array)
            self._ids |= new_ids

    def remove(self, ids: Iterable[int]) -> int:
        """Remove vectors by id; unknown ids are ignored. Returns how many were removed."""
        with self._lock:
            present = set(ids) & self._ids
            if not present:
                return 0
            if self.kind == "hnsw":
                self._tombstones |= present
            else:
                self._index.remove_ids(faiss.IDSelectorBatch(_id_array(present)))
            self._ids -= present
            return len(present)

    def search(
        self, vector: np.ndarray, k: int, allowed_ids: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The `k` nearest ids by inner product, restricted to `allowed_ids` when given."""
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        if query.shape[1] != self.dim:
            raise ValueError(f"expected a vector of dim {self.dim}, got {query.shape[1]}")
        with self._lock:
            candidates = self._ids if allowed_ids is None else self._ids.intersection(allowed_ids)
            if k <= 0 or not candidates:
                return []
            if allowed_ids is None:
                return self._selector_search(query, k, None)[0]
            if self.kind == "hnsw" and len(candidates) <= EXACT_FILTER_LIMIT:
                return self._exact_search(query, k, candidates)
            return self._selector_search(query, k, candidates)[0]

    def vectors(self, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """The vectors of those of `ids` that are searchable, by id."""
        with self._lock:
            present = [vector_id for vector_id in dict.fromkeys(ids) if vector_id in self._ids]
            if not present:
                return {}
            rows = self._index.reconstruct_batch(_id_array(present))
        return dict(zip(present, rows, strict=True))

    def search_many(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """`search` of each row of `queries`, unfiltered, in one FAISS call: a matrix product
        reads the index once for all of them, where one search at a time reads it per query."""
        matrix = np.ascontiguousarray(queries, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            raise ValueError(f"expected queries of dim {self.dim}, got {matrix.shape}")
        with self._lock:
            if k <= 0 or not self._ids:
                return [[] for _ in range(len(matrix))]
            return self._selector_search(matrix, k, None)

    def save(self, path: Path) -> None:
        """Write the index to `path` atomically (temp file, fsync, rename)."""
        with self._lock:
            serialized = faiss.serialize_index(self._index)
            tombstones = _id_array(self._tombstones)
        write_index_file(Path(path), self.kind, serialized, tombstones)

    @classmethod
    def load(cls, path: Path) -> VectorIndex:
        """Read an index written by `save`."""
        kind, serialized, tombstones = read_index_file(Path(path))
        stored = faiss.deserialize_index(serialized)
        if kind not in ("flat", "hnsw") or not isinstance(stored, faiss.IndexIDMap2):
            raise ValueError(f"{path} does not hold a flat or hnsw id-mapped index")
        loaded = cls(stored.d, kind)
        loaded._index = stored
        loaded._tombstones = set(tombstones.tolist())
        loaded._ids = set(faiss.vector_to_array(loaded._index.id_map).tolist()) - loaded._tombstones
        return loaded

    def _selector_search(
        self, queries: np.ndarray, k: int, allowed: set[int] | None
    ) -> list[list[tuple[int, float]]]:
        selector: faiss.IDSelector | None = None
        if allowed is not None:
            selector = faiss.IDSelectorBatch(_id_array(allowed))
        elif self._tombstones:
            selector = faiss.IDSelectorNot(faiss.IDSelectorBatch(_id_array(self._tombstones)))
        if self.kind == "hnsw":
            params: faiss.SearchParameters = faiss.SearchParametersHNSW(
                sel=selector, efSearch=max(HNSW_SEARCH_DEPTH, k)
            )
        else:
            params = faiss.SearchParameters(sel=selector)
        scores, labels = self._index.search(queries, k, params=params)
        return [
            [
                (int(label), float(score))
                for label, score in zip(row_labels, row_scores, strict=True)
                if label >= 0
            ]
            for row_labels, row_scores in zip(labels, scores, strict=True)
        ]

    def _exact_search(
        self, query: np.ndarray, k: int, candidates: set[int]
    ) -> list[tuple[int, float]]:
        ids = _id_array(candidates)
        scores = self._index.reconstruct_batch(ids) @ query[0]
        best = np.argsort(-scores, kind="stable")[:k]
        return [(int(ids[i]), float(scores[i])) for i in best]


def _id_array(ids: Collection[int]) -> np.ndarray:
    return np.fromiter(ids, dtype=np.int64, count=len(ids))
