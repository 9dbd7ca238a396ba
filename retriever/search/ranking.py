"""How a query's chunks are ranked: by embedding similarity alone (dense, the default), by
keywords alone, or by both fused (hybrid, `retriever.search.fusion`), then optionally reranked.

A `Ranking` weighs the two lists the way OpenAI's `ranking_options.hybrid_search` does: a
`text_weight` of 0 is plain dense search, with cosine similarities as scores; any other weights
fuse the lists by reciprocal rank, scores in [0, 1]. A `Reranker` may then reorder the best
`RERANK_CANDIDATES`, its scores replacing the ranking's: ragblend's is the served model itself
(`retriever.search.query_likelihood`), because no PyPI package carries cross-encoder weights
that load offline (FlashRank and its kin download theirs at run time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from retriever.search.fusion import reciprocal_rank_fusion

FUSION_DEPTH = 50
"""Candidates each list contributes to the fusion."""
RERANK_CANDIDATES = 20
"""Candidates a reranker reorders unless the library is told otherwise."""
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
_KEYWORD_SEARCHES = ThreadPoolExecutor(thread_name_prefix="keyword-search")
"""Where hybrid searches run their keyword half while the dense half runs."""


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
    `FUSION_DEPTH` from each, so a chunk both find a little further down still rises. Hybrid
    runs the keyword search on another thread meanwhile (the database, FAISS and torch all
    release the GIL), so it takes about as long as the slower search, not both added."""
    if ranking.dense:
        return dense(count)
    depth = max(count, FUSION_DEPTH)
    if ranking.embedding_weight:
        keyword_search = _KEYWORD_SEARCHES.submit(keyword, depth)
        dense_ids, keyword_ids = _ids(dense(depth)), _ids(keyword_search.result())
    else:
        dense_ids, keyword_ids = [], _ids(keyword(depth))
    fused = reciprocal_rank_fusion(
        [dense_ids, keyword_ids], [ranking.embedding_weight, ranking.text_weight]
    )
    return fused[:count]


def _ids(found: Scored) -> list[int]:
    return [chunk_id for chunk_id, _ in found]
