"""Which library chunks stand nearest a chunk, and whose nearest chunks a new batch joins.

With neighbour contexts (`RAGBLEND_CHUNK_CONTEXT=neighbours`) a library chunk's KV is computed
behind the chunks most likely to be retrieved with it: its nearest other chunks in the vector
index, found by the chunk's own embedding (chunks of its own document count too).

When new chunks are indexed, an older chunk whose k nearest now include one of them was computed
behind a neighbourhood that no longer holds, and is precomputed again if it matters: the engine
keeps only the last `window_tokens` of the context (the nearest neighbour's end), so a new chunk
that would stand further back than that changes nothing. Only chunks near the new ones are
examined: those among each new chunk's `CANDIDATE_FACTOR * k` nearest. Nearness is not
symmetric, so a chunk in a sparse region that a new chunk joins while the new chunk has many
closer neighbours can be missed: on 500 BIG-bench passages ingested 10 at a time (k=3) this
finds 94% of the chunks whose nearest changed (70% with a factor of 2, 99% with 16), the
candidates' k-searches done in one index call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retriever.search.index import VectorIndex

CANDIDATE_FACTOR = 8
SEARCH_BLOCK = 1024
"""Chunks whose neighbours one index call finds (the query block FAISS multiplies at once)."""


@dataclass(frozen=True)
class NeighbourPolicy:
    """How library chunks are precomputed behind their neighbours."""

    count: int
    """The nearest chunks that stand before each chunk."""
    window_tokens: int
    """Context tokens the engine keeps before a chunk, the end of the joined neighbours."""


def nearest_chunks(index: VectorIndex, chunk_id: int, k: int) -> list[tuple[int, float]] | None:
    """The `k` chunks nearest `chunk_id` by inner product, nearest first, itself left out; None
    when `chunk_id` is not in `index`."""
    return nearest_of_each(index, [chunk_id], k).get(chunk_id)


def nearest_of_each(
    index: VectorIndex, chunk_ids: Sequence[int], k: int
) -> dict[int, list[tuple[int, float]]]:
    """`nearest_chunks` of each of `chunk_ids` in `index` (the others left out, repeats once),
    searched `SEARCH_BLOCK` at a time: a batch's neighbourhoods cost a few index reads, not one
    each."""
    vectors = index.vectors(chunk_ids)
    ids = list(vectors)
    nearest: dict[int, list[tuple[int, float]]] = {}
    for start in range(0, len(ids), SEARCH_BLOCK):
        block = ids[start : start + SEARCH_BLOCK]
        found = index.search_many(np.stack([vectors[chunk_id] for chunk_id in block]), k + 1)
        for chunk_id, row in zip(block, found, strict=True):
            nearest[chunk_id] = [(other, score) for other, score in row if other != chunk_id][:k]
    return nearest


def context_order(neighbours: Sequence[tuple[int, float]]) -> list[int]:
    """Neighbour ids in the order they stand before the chunk: the most similar last, nearest
    the chunk, where retrieval puts the best match's neighbours."""
    return [chunk_id for chunk_id, _ in sorted(neighbours, key=lambda pair: pair[1])]


def joined_neighbourhoods(
    index: VectorIndex, new_ids: Sequence[int], k: int
) -> dict[int, list[int]]:
    """Chunks not in `new_ids` whose `k` nearest chunks now include one of `new_ids`, each with
    its neighbours nearer than the nearest new one (nearest first): they stand after it."""
    new = set(new_ids)
    around_new = nearest_of_each(index, new_ids, CANDIDATE_FACTOR * k)
    candidates = [other for found in around_new.values() for other, _ in found if other not in new]
    joined: dict[int, list[int]] = {}
    for candidate, found in nearest_of_each(index, candidates, k).items():
        nearest = [other for other, _ in found]
        first_new = next((at for at, other in enumerate(nearest) if other in new), None)
        if first_new is not None:
            joined[candidate] = nearest[:first_new]
    return joined


def within_window(
    joined: Mapping[int, Sequence[int]], lengths: Mapping[int, int], window_tokens: int
) -> set[int]:
    """The joined chunks whose new neighbour would stand, at least partly, in the last
    `window_tokens` of their context: the nearer neighbours after it, `lengths` tokens each
    (separators not counted: it errs towards precomputing again), leave room."""
    return {
        chunk_id
        for chunk_id, nearer in joined.items()
        if sum(lengths.get(other, 0) for other in nearer) < window_tokens
    }
