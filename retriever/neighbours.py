"""Which library chunks stand nearest a chunk, and whose nearest chunks a new batch joins.

With neighbour contexts (`RAGBLEND_CHUNK_CONTEXT=neighbours`) a library chunk's KV is computed
behind the chunks most likely to be retrieved with it: its nearest other chunks in the vector
index, found by the chunk's own embedding (chunks of its own document count too).

When new chunks are indexed, an older chunk whose k nearest now include one of them was computed
behind a neighbourhood that no longer holds, and is precomputed again. Only chunks near the new
ones are examined: those among each new chunk's `CANDIDATE_FACTOR * k` nearest. Nearness is not
symmetric, so a chunk in a sparse region that a new chunk joins while the new chunk has many
closer neighbours is missed; the wider candidate set keeps that rare.
"""

from __future__ import annotations

from collections.abc import Sequence

from retriever.index import VectorIndex

CANDIDATE_FACTOR = 2


def nearest_chunks(index: VectorIndex, chunk_id: int, k: int) -> list[tuple[int, float]] | None:
    """The `k` chunks nearest `chunk_id` by inner product, nearest first, itself left out; None
    when `chunk_id` is not in `index`."""
    vector = index.vector(chunk_id)
    if vector is None:
        return None
    found = index.search(vector, k + 1)
    return [(other, score) for other, score in found if other != chunk_id][:k]


def context_order(neighbours: Sequence[tuple[int, float]]) -> list[int]:
    """Neighbour ids in the order they stand before the chunk: the most similar last, nearest
    the chunk, where retrieval puts the best match's neighbours."""
    return [chunk_id for chunk_id, _ in sorted(neighbours, key=lambda pair: pair[1])]


def joined_neighbourhoods(index: VectorIndex, new_ids: Sequence[int], k: int) -> set[int]:
    """Chunks not in `new_ids` whose `k` nearest chunks now include one of `new_ids`."""
    new = set(new_ids)
    examined: set[int] = set()
    joined: set[int] = set()
    for new_id in new_ids:
        for candidate, _ in nearest_chunks(index, new_id, CANDIDATE_FACTOR * k) or []:
            if candidate in new or candidate in examined:
                continue
            examined.add(candidate)
            if any(other in new for other, _ in nearest_chunks(index, candidate, k) or []):
                joined.add(candidate)
    return joined
