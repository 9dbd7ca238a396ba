"""OpenAI's ``chunking_strategy``, checked and turned into the library's ``Chunking``.

``static`` is OpenAI's: ``max_chunk_size_tokens`` 100 to 4096 and ``chunk_overlap_tokens`` at most
half of it, counted in the served model's tokens. ``auto`` is this server's default chunking
(``RAGBLEND_CHUNK_TOKENS``, no overlap), not OpenAI's 800/400: chunks are what a prompt is built
from and what chunk KV is stored for, so 800-token chunks would fill a small model's context with
a few of them, and a 400-token overlap would store and recompute every token twice. A vector store
file reports the static sizes its chunks were cut with, whichever way they were asked for.
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import APIError
from retriever import Chunking

MIN_CHUNK_TOKENS = 100
MAX_CHUNK_TOKENS = 4096


def requested_chunking(
    strategy: Any, default: Chunking, param: str = "chunking_strategy"
) -> Chunking | None:
    """The chunking a request asks for; None when it does not say. A 400 naming the field
    otherwise."""
    if strategy is None:
        return None
    if not isinstance(strategy, dict):
        raise APIError(400, f"'{param}' must be an object.", param=param)
    kind = strategy.get("type")
    if kind == "auto":
        _no_other_fields(strategy, {"type"}, param)
        return default
    if kind != "static":
        raise APIError(
            400, f"'{param}.type' must be 'auto' or 'static', not {kind!r}.", param=f"{param}.type"
        )
    _no_other_fields(strategy, {"type", "static"}, param)
    static = strategy.get("static")
    if not isinstance(static, dict):
        raise APIError(
            400,
            f"'{param}.static' must be an object for a static strategy.",
            param=f"{param}.static",
        )
    _no_other_fields(static, {"max_chunk_size_tokens", "chunk_overlap_tokens"}, f"{param}.static")
    size = _whole_number(static, "max_chunk_size_tokens", f"{param}.static")
    if not MIN_CHUNK_TOKENS <= size <= MAX_CHUNK_TOKENS:
        raise APIError(
            400,
            f"'{param}.static.max_chunk_size_tokens' must be {MIN_CHUNK_TOKENS} to "
            f"{MAX_CHUNK_TOKENS}, not {size}.",
            param=f"{param}.static.max_chunk_size_tokens",
        )
    overlap = _whole_number(static, "chunk_overlap_tokens", f"{param}.static")
    if not 0 <= overlap <= size // 2:
        raise APIError(
            400,
            f"'{param}.static.chunk_overlap_tokens' must be 0 to half of max_chunk_size_tokens "
            f"({size // 2}), not {overlap}.",
            param=f"{param}.static.chunk_overlap_tokens",
        )
    return Chunking(size, overlap)


def strategy_object(chunking: Chunking) -> dict[str, Any]:
    """How a vector store file reports the chunking its chunks were cut with."""
    static = {
        "max_chunk_size_tokens": chunking.max_tokens,
        "chunk_overlap_tokens": chunking.overlap_tokens,
    }
    return {"type": "static", "static": static}


def _whole_number(fields: dict[str, Any], name: str, where: str) -> int:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(
            400, f"'{where}.{name}' must be an integer, not {value!r}.", param=f"{where}.{name}"
        )
    return value


def _no_other_fields(fields: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        name = f"{where}.{unknown[0]}"
        raise APIError(400, f"Unknown parameter: '{name}'.", param=name)
