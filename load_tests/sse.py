"""Parsing of OpenAI-style server-sent event streams, one ``data:`` line per chunk."""

from __future__ import annotations

import json
from typing import Any, Final, Literal

STREAM_DONE: Final = "[DONE]"

Endpoint = Literal["completions", "chat"]


class MalformedChunkError(ValueError):
    """A ``data:`` line whose payload is not a JSON object."""


def parse_sse_data(line: str) -> str | None:
    """Return the payload of a ``data:`` line, or None for blank lines, comments and other fields.

    Per the SSE format one space after the colon is part of the separator, not the payload.
    """
    if not line.startswith("data:"):
        return None
    payload = line[len("data:") :]
    return payload[1:] if payload.startswith(" ") else payload


def decode_chunk(payload: str) -> dict[str, Any]:
    try:
        chunk = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise MalformedChunkError(f"chunk is not JSON: {payload[:80]!r}") from exc
    if not isinstance(chunk, dict):
        raise MalformedChunkError(f"chunk is not a JSON object: {payload[:80]!r}")
    return chunk


def chunk_text(chunk: dict[str, Any], endpoint: Endpoint) -> str:
    """Generated text carried by a chunk: ``text`` for completions, ``delta.content`` for chat."""
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if endpoint == "completions":
        text = choice.get("text")
    else:
        text = (choice.get("delta") or {}).get("content")
    return text if isinstance(text, str) else ""


def chunk_completion_tokens(chunk: dict[str, Any]) -> int | None:
    """``usage.completion_tokens`` when the chunk reports usage (``include_usage``), else None."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None
    tokens = usage.get("completion_tokens")
    return tokens if isinstance(tokens, int) else None


def chunk_has_error(chunk: dict[str, Any]) -> bool:
    """Whether the server reported an error inside the stream instead of a status code."""
    return chunk.get("error") is not None


def chunk_prompt_usage(chunk: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt tokens, cached prompt tokens) from a usage chunk, or None."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict) or "prompt_tokens" not in usage:
        return None
    details = usage.get("prompt_tokens_details") or {}
    return int(usage["prompt_tokens"]), int(details.get("cached_tokens") or 0)
