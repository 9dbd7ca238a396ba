"""``/v1/embeddings`` in OpenAI's terms, apart from HTTP: the request checked against the
``openai`` package's ``EmbeddingCreateParams``, the reply in ``CreateEmbeddingResponse``'s shape.

The model is the library's own embedding model (MiniLM unless ``RAGBLEND_EMBEDDING_MODEL`` names
another), so a client can embed text the way ingest and retrieval do.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from openai.types import EmbeddingCreateParams

from gateway.http.errors import APIError
from gateway.openai.validation import check_text, parse_params

MAX_INPUTS = 2048
"""Inputs per request, OpenAI's own limit."""


class CountingEmbedder(Protocol):
    """What the route needs of the library's embedder (``retriever.Embedder``)."""

    name: str

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def token_counts(self, texts: list[str]) -> list[int]: ...

    def embed(self, texts: list[str], batch_size: int = ...) -> np.ndarray: ...


@dataclass(frozen=True)
class EmbeddingQuery:
    model: str
    texts: list[str]
    as_base64: bool
    dimensions: int | None


def parse_query(body: Any) -> EmbeddingQuery:
    """The request's texts and options, or a 400 naming the field."""
    params = parse_params(EmbeddingCreateParams, body)
    return EmbeddingQuery(
        model=params["model"],
        texts=_texts(params["input"]),
        as_base64=params.get("encoding_format", "float") == "base64",
        dimensions=params.get("dimensions"),
    )


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        message = (
            "'input' must be a string or a list of strings; token-id inputs are not supported "
            "(they would have to be ids of the embedding model's own tokenizer)."
        )
        raise APIError(400, message, param="input")
    if not value:
        raise APIError(400, "'input' must not be an empty list.", param="input")
    if len(value) > MAX_INPUTS:
        message = f"'input' has {len(value)} items; at most {MAX_INPUTS} are accepted."
        raise APIError(400, message, param="input")
    for index, text in enumerate(value):
        if not text:
            raise APIError(400, f"'input' item {index} is an empty string.", param="input")
        check_text(text, "input")
    return value


def check_model(query: EmbeddingQuery, embedder: CountingEmbedder, served: set[str]) -> None:
    """The embedding model's own name, or the served chat model's: a client configured with one
    model name for everything still embeds."""
    if query.model != embedder.name and query.model not in served:
        raise APIError(
            404,
            f"The model '{query.model}' does not exist; this server embeds with '{embedder.name}'.",
            param="model",
            code="model_not_found",
        )


def check_fit(query: EmbeddingQuery, embedder: CountingEmbedder, counts: list[int]) -> None:
    """Refuse ``dimensions`` other than the model's and texts the model would cut off."""
    if query.dimensions is not None and query.dimensions != embedder.dim:
        message = (
            f"'{embedder.name}' embeds in {embedder.dim} dimensions; "
            f"'dimensions' {query.dimensions} cannot be served."
        )
        raise APIError(400, message, param="dimensions")
    limit = embedder.max_tokens
    for index, count in enumerate(counts):
        if count > limit:
            message = (
                f"'{embedder.name}' reads at most {limit} tokens, but 'input' item {index} "
                f"has {count} tokens. Shorten it."
            )
            raise APIError(400, message, param="input", code="context_length_exceeded")


def embedding_response(
    query: EmbeddingQuery, model: str, vectors: np.ndarray, counts: list[int]
) -> dict[str, Any]:
    """``CreateEmbeddingResponse``; base64 vectors are little-endian float32, as OpenAI's."""
    data = [
        {"object": "embedding", "index": index, "embedding": _encoded(vector, query.as_base64)}
        for index, vector in enumerate(vectors)
    ]
    tokens = sum(counts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _encoded(vector: np.ndarray, as_base64: bool) -> list[float] | str:
    if as_base64:
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(float).tolist()
