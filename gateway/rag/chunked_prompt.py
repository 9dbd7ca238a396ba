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
from gateway.rag.tool_block import find_block, tool_block

CHUNK_SEPARATOR = "\n\n"
PrefixKind = Literal["plain", "chat", "passages"]
ChunkContext = Literal["cold", "library", "learnt", "exact", "tools"]
_SENTINEL = "\u2063ragblend-documents\u2063"


@dataclass(frozen=True)
class ChunkedPrompt:
    token_ids: list[int]
    spans: tuple[ChunkSpan, ...]
    tool_span: int | None = None
    """Which of ``spans`` holds the chat template's tool catalog (``gateway.rag.tool_block``);
    the others are the request's chunks (documents, retrieved or pasted passages)."""

    @property
    def chunk_spans(self) -> tuple[ChunkSpan, ...]:
        """The spans of the request's chunks, the tool catalog left out."""
        return tuple(span for n, span in enumerate(self.spans) if n != self.tool_span)


@dataclass(frozen=True)
class Chunks:
    """A request's chunks: token ids in prompt order and the tokens placed after each one."""

    token_ids: list[list[int]]
    separator: tuple[int, ...] = ()
    sources: list[dict[str, Any]] | None = None
    """What retrieval used (document id, chunk index, score, character span); None for sent
    documents."""
    context: ChunkContext = "cold"
    """What the chunks' stored KV was computed behind: the fixed prefix (``cold``), library
    neighbours (``library``), the chunks before each one here (``learnt``), which take the
    in-context blend recipe, or this prompt's own head and the chunks before each one
    (``exact``: what a prefill computes, reused with nothing recomputed); ``tools`` for a
    prompt whose only chunk is its tool catalog (computed behind another system prompt)."""


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


def split_text(
    text: str, pieces: list[tuple[int, int]], tokenizer: Any, head: list[int]
) -> tuple[list[int], list[ChunkSpan | None]]:
    """``head``, then ``text`` tokenized piece by piece, each of ``pieces`` (character ranges,
    in order, apart) alone; each piece's span, None for one at the prompt's first token (left in
    the text after it: a chunk there would replace the attention sink)."""
    ids, spans, cursor = list(head), [], 0
    for start, end in pieces:
        before = tokenizer.encode(text[cursor:start], add_special_tokens=False)
        if not ids and not before:
            spans.append(None)
            continue
        ids += before
        piece = tokenizer.encode(text[start:end], add_special_tokens=False)
        spans.append(ChunkSpan(len(ids), len(ids) + len(piece)))
        ids += piece
        cursor = end
    ids += tokenizer.encode(text[cursor:], add_special_tokens=False)
    return ids, spans


def with_tool_block(
    text: str, tools: list[dict[str, Any]] | None, tokenizer: Any, head: list[int] | None = None
) -> ChunkedPrompt:
    """A rendered chat prompt (after ``head``) with its tool catalog as the one span, if the
    template wrote one."""
    found = find_block(text, tool_block(tokenizer, tools))
    ids, spans = split_text(text, [] if found is None else [found], tokenizer, head or [])
    placed = tuple(span for span in spans if span is not None)
    return ChunkedPrompt(ids, placed, 0 if placed else None)


def chat_with_tools(
    messages: list[ChatMessage], tokenizer: Any, tools: list[dict[str, Any]] | None
) -> ChunkedPrompt:
    """The chat template over ``messages`` with ``tools`` offered, their catalog a span."""
    return with_tool_block(render_chat(messages, tokenizer, tools), tools, tokenizer)


def _place(head: ChunkedPrompt, chunks: Chunks, tail: list[int]) -> ChunkedPrompt:
    ids, spans = list(head.token_ids), list(head.spans)
    for chunk in chunks.token_ids:
        spans.append(ChunkSpan(len(ids), len(ids) + len(chunk)))
        ids += chunk
        ids += chunks.separator
    return ChunkedPrompt(ids + tail, tuple(spans), head.tool_span)


def completion_with_chunks(prompt: str, chunks: Chunks, tokenizer: Any) -> ChunkedPrompt:
    """[prefix][chunk 1]...[chunk k][prompt]."""
    tail = tokenizer.encode(prompt, add_special_tokens=False)
    return _place(ChunkedPrompt(completion_head(tokenizer), ()), chunks, tail)


def chat_with_chunks(
    messages: list[ChatMessage],
    chunks: Chunks,
    tokenizer: Any,
    tools: list[dict[str, Any]] | None = None,
) -> ChunkedPrompt:
    """The chat template (with ``tools`` offered, their catalog a span of its own), the chunks
    right before the last user message's content."""
    _check_user_message(messages)
    text = render_chat(messages, tokenizer, tools, before_last_user=_SENTINEL)
    head, sentinel, tail = text.partition(_SENTINEL)
    if not sentinel:
        raise APIError(400, "The chat template dropped the user message.", param="messages")
    tail_ids = tokenizer.encode(tail, add_special_tokens=False)
    return _place(with_tool_block(head, tools, tokenizer), chunks, tail_ids)


def _check_user_message(messages: list[ChatMessage]) -> None:
    if all(message.role != "user" for message in messages):
        raise APIError(400, "documents and retrieval need a user message.", param="messages")
