"""How a query's chunks are ranked: by embedding similarity alone (dense, the default), by
keywords alone, or by both fused (hybrid, `retriever.search.fusion`), then optionally reranked.

A `Ranking` weighs the two lists the way OpenAI's `ranking_options.hybrid_search` does: a
`text_weight` of 0 is plain dense search, with cosine similarities as scores; any other weights
fuse the lists by reciprocal rank, scores in [0, 1]. A `Reranker` (a cross-encoder, say) may
then reorder the candidates; none ships with ragblend, because no PyPI package carries
cross-encoder weights that load offline (FlashRank and its kin download theirs at run time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from retriever.search.fusion import reciprocal_rank_fusion

FUSION_DEPTH = 50
"""Candidates each list contributes to the fusion, and a reranker reorders."""
Scored = list[tuple[int, float]]
"""(chunk id, score) pairs, best first."""


@dataclass(frozen=True)
class Ranking:
    embedding_weight: float = 1.0
    text_weight: float = 0.0
    rerank: bool = True
    """Whether a reranker, where the library has one, reorders the candidates."""

    def __post_init__(self) -> None:
        weights = (self.embedding_weight, self.text_weight)
        if not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
            raise ValueError(f"ranking weights must be >= 0 and not both 0, got {weights}")

    @property
    def dense(self) -> bool:
        return self.text_weight == 0


DENSE = Ranking()


class Reranker(Protocol):
    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """How well each text answers `query`, in [0, 1]."""
        ...


def ranked_chunks(
    ranking: Ranking,
    count: int,
    dense: Callable[[int], Scored],
    keyword: Callable[[int], Scored],
) -> Scored:
    """The best `count` chunks by `ranking`, from `dense(n)` and `keyword(n)`, the n best chunks
    of each search; a search runs only when it is weighted. Fusion draws at least
    `FUSION_DEPTH` from each, so a chunk both find a little further down still rises."""
    if ranking.dense:
        return dense(count)
    depth = max(count, FUSION_DEPTH)
    rankings = [
        [chunk_id for chunk_id, _ in search(depth)] if weight else []
        for search, weight in ((dense, ranking.embedding_weight), (keyword, ranking.text_weight))
    ]
    fused = reciprocal_rank_fusion(rankings, [ranking.embedding_weight, ranking.text_weight])
    return fused[:count]
