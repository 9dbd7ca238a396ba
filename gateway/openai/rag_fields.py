"""ragblend's request extensions for chunks: sent ``documents`` (strings or vLLM's
``{"title", "text"}`` objects), ``retrieval`` from the library and per-request ``blend``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from engine.contract import Metric
from gateway.openai.filters import Filter, parse_filter
from gateway.openai.ranking import RankingOptions
from gateway.openai.text import Text

MAX_DOCUMENTS = 64


class BlendOptions(BaseModel):
    """Per-request blending; unset fields take the server defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["blend", "reuse", "full"] | None = None
    recompute_ratio: float | None = Field(None, ge=0.0, le=1.0)
    metric: Metric | None = None
    """What picks the tokens to recompute (``RAGBLEND_BLEND_METRIC``'s values): a summarizing
    client may prefer ``v`` where the server's default for library chunks is ``probe``."""
    segment: bool | None = None
    """Find known passages pasted into the prompt and reuse their chunk KV (unset:
    ``RAGBLEND_BLEND_SEGMENT``); only for requests without documents or retrieval."""


class RetrievalOptions(BaseModel):
    """Retrieve chunks from the ingested documents; they become the request's documents."""

    model_config = ConfigDict(extra="forbid")

    top_k: int | None = Field(None, ge=1, le=MAX_DOCUMENTS)
    """Unset: ``RAGBLEND_RETRIEVAL_TOP_K``."""
    min_score: float | None = Field(None, ge=-1.0, le=1.0)
    document_ids: list[Text] | None = Field(None, min_length=1)
    ranking_options: RankingOptions | None = None
    """As on ``file_search``; ``score_threshold`` is ``min_score`` kept to OpenAI's [0, 1]."""
    filters: Filter | None = None
    """Vector store search's filter grammar, on each document's ``metadata``: only the chunks
    of documents that pass are ranked."""

    @field_validator("filters", mode="before")
    @classmethod
    def _parsed_filters(cls, raw: Any) -> Filter | None:
        """Checked by ``parse_filter``: a malformed filter is a 400 naming its part
        (``retrieval.filters.filters.0.key``), raised through validation as it is."""
        return None if raw is None else parse_filter(raw, "retrieval.filters")

    @model_validator(mode="after")
    def _one_threshold(self) -> RetrievalOptions:
        options = self.ranking_options
        if self.min_score is not None and options and options.score_threshold is not None:
            raise ValueError("send min_score or ranking_options.score_threshold, not both")
        return self

    @property
    def threshold(self) -> float | None:
        """The score a retrieved chunk needs, whichever field set it."""
        if self.min_score is not None or self.ranking_options is None:
            return self.min_score
        return self.ranking_options.score_threshold


class TitledDocument(BaseModel):
    """vLLM's document object: the title goes on its own line before the text, in the chunk."""

    model_config = ConfigDict(extra="forbid")

    title: Text | None = None
    text: Text

    def chunk_text(self) -> str:
        return self.text if self.title is None else f"{self.title}\n{self.text}"


def _document_kind(value: Any) -> str:
    return "TitledDocument" if isinstance(value, dict) else "Text"


Document = Annotated[
    Annotated[Text, Tag("Text")] | Annotated[TitledDocument, Tag("TitledDocument")],
    Discriminator(_document_kind),
]
"""A string, or an object: its errors name the object's fields."""
