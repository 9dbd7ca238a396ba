"""Assemble prompts with documents as explicit chunks: token ids plus each chunk's span."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.connector.plan import ChunkSpan
from gateway.errors import APIError
from gateway.protocol import ChatMessage

CHUNK_SEPARATOR = "\n\n"
_SENTINEL = "\u2063ragblend-documents\u2063"


@dataclass(frozen=True)
class ChunkedPrompt:
    token_ids: list[int]
    spans: tuple[ChunkSpan, ...]


def chunk_prefix(tokenizer: Any) -> list[int]:
    """The fixed tokens every chunk is precomputed behind, and every RAG prompt starts with."""
    if tokenizer.bos_token_id is not None:
        return [tokenizer.bos_token_id]
    return tokenizer.encode("\n", add_special_tokens=False)


def chunk_tokens(document: str, tokenizer: Any) -> list[int]:
    """A document tokenized on its own, so its ids are the same wherever it is placed."""
    return tokenizer.encode(document + CHUNK_SEPARATOR, add_special_tokens=False)


def _place(head: list[int], documents: list[str], tail: list[int], tokenizer: Any) -> ChunkedPrompt:
    ids, spans = list(head), []
    for document in documents:
        chunk = chunk_tokens(document, tokenizer)
        spans.append(ChunkSpan(len(ids), len(ids) + len(chunk)))
        ids += chunk
    return ChunkedPrompt(ids + tail, tuple(spans))


def completion_with_documents(prompt: str, documents: list[str], tokenizer: Any) -> ChunkedPrompt:
    """[prefix][document 1]...[document k][prompt]."""
    tail = tokenizer.encode(prompt, add_special_tokens=False)
    return _place(chunk_prefix(tokenizer), documents, tail, tokenizer)


def chat_with_documents(
    messages: list[ChatMessage], documents: list[str], tokenizer: Any
) -> ChunkedPrompt:
    """The chat template, with the documents right before the last user message's content."""
    last_user = max(
        (index for index, message in enumerate(messages) if message.role == "user"), default=None
    )
    if last_user is None:
        raise APIError(400, "documents need a user message to precede.", param="messages")
    conversation = [{"role": m.role, "content": m.text} for m in messages]
    conversation[last_user]["content"] = _SENTINEL + conversation[last_user]["content"]
    text = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    head, sentinel, tail = text.partition(_SENTINEL)
    if not sentinel:
        raise APIError(400, "The chat template dropped the user message.", param="messages")
    encode = tokenizer.encode
    return _place(
        encode(head, add_special_tokens=False),
        documents,
        encode(tail, add_special_tokens=False),
        tokenizer,
    )
