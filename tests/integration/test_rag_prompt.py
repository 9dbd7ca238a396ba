"""Prompt assembly with the real SmolLM2 tokenizer and chat template."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.openai.protocol import ChatMessage
from gateway.rag.chunked_prompt import (
    chat_with_chunks,
    chunk_prefix,
    completion_head,
    completion_with_chunks,
    document_chunks,
)

pytestmark = pytest.mark.integration

DOCUMENTS = ["The capital of Peru is Lima.", "The capital of Chile is Santiago."]


def test_chat_prefix_is_exactly_what_precedes_the_first_chunk_of_a_chat_turn(
    tokenizer: Any,
) -> None:
    chunks = document_chunks(DOCUMENTS, tokenizer)
    turn = [ChatMessage(role="user", content="Which capital is further south?")]
    prompt = chat_with_chunks(turn, chunks, tokenizer)
    head = chunk_prefix(tokenizer, "chat")
    assert len(head) > len(completion_head(tokenizer))
    assert prompt.spans[0].start == len(head)
    assert prompt.token_ids[: len(head)] == head


def test_completion_prompts_keep_the_plain_head_whatever_chunks_are_computed_behind(
    tokenizer: Any,
) -> None:
    prompt = completion_with_chunks("Answer:", document_chunks(DOCUMENTS, tokenizer), tokenizer)
    head = chunk_prefix(tokenizer, "plain")
    assert head == completion_head(tokenizer)
    assert prompt.token_ids[: len(head)] == head and prompt.spans[0].start == len(head)


def test_passages_prefix_is_the_chat_head_then_passages_ending_in_a_chunk_separator(
    tokenizer: Any,
) -> None:
    head = chunk_prefix(tokenizer, "chat")
    prefix = chunk_prefix(tokenizer, "passages")
    assert prefix[: len(head)] == head and len(prefix) > len(head) + 100
    text = tokenizer.decode(prefix[len(head) :])
    assert text.startswith("The Harbour Museum") and text.endswith("city council.\n\n")
