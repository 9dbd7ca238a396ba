"""Assemble prompts with explicit chunks: token ids plus each chunk's span.

A chunk's token ids are exactly what was (or will be) stored for it, so its cached KV is found
wherever it lands. Sent ``documents`` are tokenized one by one, their text alone, and retrieved
chunks use their stored ids (the tokens of their text alone); blank-line separator tokens follow
each chunk, outside the spans, recomputed like any uncached token. A chunk's ids are so the same
whether it was sent, retrieved or pasted into a message (``gateway.rag.pasted_prompt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.contract import ChunkSpan
from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage
from gateway.openai.tool_prompt import render_chat
from gateway.rag.context_passages import CONTEXT_PASSAGES

CHUNK_SEPARATOR = "\n\n"
PrefixKind = Literal["plain", "chat", "passages"]
ChunkContext = Literal["cold", "library", "learnt", "exact"]
_SENTINEL = "\u2063ragblend-documents\u2063"


@dataclass(frozen=True)
class ChunkedPrompt:
    token_ids: list[int]
    spans: tuple[ChunkSpan, ...]


@dataclass(frozen=True)
class Chunks:
    """A request's chunks: token ids in prompt order and the tokens placed after each one."""

    token_ids: list[list[int]]
    separator: tuple[int, ...] = ()
    sources: list[dict[str, Any]] | None = None
    """What retrieval used (document id, chunk index, score); None for sent documents."""
    context: ChunkContext = "cold"
    """What the chunks' stored KV was computed behind: the fixed prefix (``cold``), library
    neighbours (``library``), the chunks before each one here (``learnt``), which take the
    in-context blend recipe, or this prompt's own head and the chunks before each one
    (``exact``: what a prefill computes, reused with nothing recomputed)."""


def completion_head(tokenizer: Any) -> list[int]:
    """What every completion prompt with chunks starts with: BOS, or a newline without one."""
    if tokenizer.bos_token_id is not None:
        return [tokenizer.bos_token_id]
    return tokenizer.encode("\n", add_special_tokens=False)


def chat_head(tokenizer: Any) -> list[int]:
    """The chat template's tokens before a lone user message's content (system prompt included),
    where the chunks of a one-turn chat request land."""
    conversation = [{"role": "user", "content": _SENTINEL}]
    text = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    head, sentinel, _ = text.partition(_SENTINEL)
    if not sentinel:
        raise ValueError("the chat template drops the user message")
    return tokenizer.encode(head, add_special_tokens=False)


def chunk_prefix(tokenizer: Any, kind: PrefixKind = "plain") -> list[int]:
    """The fixed tokens every chunk is precomputed behind (not stored): the completion head; the
    chat head, which puts each chunk's cached KV closer to what chat prompts give it; or the
    chat head followed by neutral passages, as most chunks follow other passages."""
    has_chat = bool(getattr(tokenizer, "chat_template", None))
    head = chat_head(tokenizer) if kind != "plain" and has_chat else completion_head(tokenizer)
    if kind != "passages":
        return head
    passages = "".join(passage + CHUNK_SEPARATOR for passage in CONTEXT_PASSAGES)
    return head + tokenizer.encode(passages, add_special_tokens=False)


def document_chunks(documents: list[str], tokenizer: Any) -> Chunks:
    """Each document tokenized on its own, so its ids are the same wherever it is placed."""
    ids = [tokenizer.encode(text, add_special_tokens=False) for text in documents]
    return stored_chunks(ids, tokenizer)


def chunk_separator(tokenizer: Any) -> list[int]:
    """The tokens placed after every retrieved chunk."""
    return tokenizer.encode(CHUNK_SEPARATOR, add_special_tokens=False)


def stored_chunks(token_ids: list[list[int]], tokenizer: Any) -> Chunks:
    return Chunks(token_ids, tuple(chunk_separator(tokenizer)))


def _place(head: list[int], chunks: Chunks, tail: list[int]) -> ChunkedPrompt:
    ids, spans = list(head), []
    for chunk in chunks.token_ids:
        spans.append(ChunkSpan(len(ids), len(ids) + len(chunk)))
        ids += chunk
        ids += chunks.separator
    return ChunkedPrompt(ids + tail, tuple(spans))


def completion_with_chunks(prompt: str, chunks: Chunks, tokenizer: Any) -> ChunkedPrompt:
    """[prefix][chunk 1]...[chunk k][prompt]."""
    tail = tokenizer.encode(prompt, add_special_tokens=False)
    return _place(completion_head(tokenizer), chunks, tail)


def chat_with_chunks(
    messages: list[ChatMessage],
    chunks: Chunks,
    tokenizer: Any,
    tools: list[dict[str, Any]] | None = None,
) -> ChunkedPrompt:
    """The chat template (with ``tools`` offered), the chunks right before the last user
    message's content."""
    _check_user_message(messages)
    text = render_chat(messages, tokenizer, tools, before_last_user=_SENTINEL)
    head, sentinel, tail = text.partition(_SENTINEL)
    if not sentinel:
        raise APIError(400, "The chat template dropped the user message.", param="messages")
    encode = tokenizer.encode
    return _place(
        encode(head, add_special_tokens=False), chunks, encode(tail, add_special_tokens=False)
    )


def _check_user_message(messages: list[ChatMessage]) -> None:
    if all(message.role != "user" for message in messages):
        raise APIError(400, "documents and retrieval need a user message.", param="messages")
