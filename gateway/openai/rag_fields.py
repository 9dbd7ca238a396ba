"""ragblend's request extensions for chunks: sent ``documents`` (strings or vLLM's
``{"title", "text"}`` objects), ``retrieval`` from the library and per-request ``blend``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from engine.contract import Metric
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


class RetrievalOptions(BaseModel):
    """Retrieve chunks from the ingested documents; they become the request's documents."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(6, ge=1, le=MAX_DOCUMENTS)
    min_score: float | None = Field(None, ge=-1.0, le=1.0)
    document_ids: list[Text] | None = Field(None, min_length=1)


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
