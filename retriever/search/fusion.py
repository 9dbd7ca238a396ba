"""Reciprocal rank fusion: one ranking out of the dense and the keyword ranking of a query.

Each list gives a chunk `weight / (K + rank)` (rank 1 for its best); a chunk's fused score is the
sum over the lists that found it (Cormack, Clarke and Büttcher, SIGIR 2009, with their K = 60),
divided by what a chunk ranked first in every list would get, so scores lie in [0, 1]: 1 for a
chunk both lists put first, 0.5 for one that only one of two equally weighted lists put first.
Ranks, not raw scores, are fused, so cosine similarities and BM25 scores need no common scale.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], weights: Sequence[float], k: int = RRF_K
) -> list[tuple[int, float]]:
    """Ids of the `rankings` (each best first) with their fused score, best first; ties keep
    the order in which the ids first appear. Weights must be >= 0 and not all 0; the ids of a
    list weighted 0 are left out unless another list has them."""
    if len(rankings) != len(weights):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    if any(weight < 0 for weight in weights) or not any(weights):
        raise ValueError(f"weights must be >= 0 and not all 0, got {list(weights)}")
    best_possible = sum(weight / (k + 1) for weight in weights)
    fused: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if weight == 0:
            continue  # a list weighted 0 adds nothing, not even its ids
        for rank, chunk_id in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (k + rank)
    ordered = sorted(fused.items(), key=lambda item: -item[1])
    return [(chunk_id, score / best_possible) for chunk_id, score in ordered]
