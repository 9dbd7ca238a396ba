"""OpenAI's ``ranking_options``, honoured wherever ragblend searches: vector store search, the
``file_search`` tool and chat's ``retrieval``.

- ``hybrid_search`` (``embedding_weight``, ``text_weight``) fuses the dense ranking with the keyword
  ranking by reciprocal rank, weighted so; a ``text_weight`` of 0 is plain dense search. Unset:
  the server's ranking (``RAGBLEND_RETRIEVAL_RANKING`` and its weights).
- ``score_threshold`` drops results scoring below it, on the scale of the score results show:
  cosine similarity in dense search, the fused score in [0, 1] otherwise (1: first in both
  rankings; 0.5: first in one of two equally weighted), and the reranker's score in [0, 1] when
  one reranked (the geometric mean of the question tokens' probabilities after the chunk).
- ``ranker``: the server's reranker (``RAGBLEND_RERANKER``) reorders the best
  ``RAGBLEND_RERANK_CANDIDATES`` chunks unless a request sends ``none``; ``auto`` (or no
  ``ranker``) leaves it to the server; a reranker's name (``served-model``) asks for it and is a
  400 when the server has not loaded it. OpenAI's ``default-2024-11-15`` names OpenAI's own
  ranker, which ragblend cannot run: a 400, not a silent substitute.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.http.errors import APIError
from gateway.settings import Settings
from retriever import Ranking

OPENAI_RANKER = "default-2024-11-15"


class HybridSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedding_weight: float = Field(ge=0.0)
    text_weight: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _weighs_something(self) -> HybridSearch:
        weights = (self.embedding_weight, self.text_weight)
        if not all(math.isfinite(weight) for weight in weights) or not any(weights):
            raise ValueError("embedding_weight and text_weight must be finite and not both 0")
        return self


class RankingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ranker: Literal["auto", "none", "served-model", "default-2024-11-15"] | None = None
    score_threshold: float | None = Field(None, ge=0.0, le=1.0)
    hybrid_search: HybridSearch | None = None

    @field_validator("ranker")
    @classmethod
    def _ranker_ragblend_has(cls, value: str | None) -> str | None:
        if value == OPENAI_RANKER:
            raise ValueError(
                f"'{OPENAI_RANKER}' is OpenAI's own ranker, which ragblend does not have; "
                "send 'auto', 'none' or 'served-model'"
            )
        return value


def server_ranking(settings: Settings) -> Ranking:
    """How the server ranks when a request does not say."""
    if settings.retrieval_ranking == "dense":
        return Ranking()
    return Ranking(settings.hybrid_embedding_weight, settings.hybrid_text_weight)


def ranking_for(
    options: RankingOptions | None, settings: Settings, where: str = "ranking_options"
) -> Ranking:
    """The ranking a request's ``ranking_options`` (at `where` in its body) ask for, over the
    server's; a 400 for a reranker the server has not loaded."""
    default = server_ranking(settings)
    if options is None:
        return default
    if options.ranker not in (None, "auto", "none", settings.reranker):
        raise APIError(
            400,
            f"ranking_options.ranker '{options.ranker}' is not loaded on this server "
            f"(RAGBLEND_RERANKER is '{settings.reranker}'); send 'auto' or 'none'.",
            param=f"{where}.ranker",
        )
    weights = options.hybrid_search
    return Ranking(
        default.embedding_weight if weights is None else weights.embedding_weight,
        default.text_weight if weights is None else weights.text_weight,
        rerank=options.ranker != "none",
    )
