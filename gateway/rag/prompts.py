"""Turn request prompts and chat messages into token ids, checked against the model's limits."""

from __future__ import annotations

from typing import Any

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage, PromptInput
from gateway.openai.tool_prompt import render_chat


def completion_prompts(prompt: PromptInput, tokenizer: Any, vocab_size: int) -> list[list[int]]:
    """One token-id list per prompt: a string, strings, token ids or lists of token ids."""
    if isinstance(prompt, str):
        return [tokenizer.encode(prompt)]
    if all(isinstance(item, int) for item in prompt):
        return [_checked_ids(prompt, vocab_size)]  # type: ignore[arg-type]
    if all(isinstance(item, str) for item in prompt):
        return [tokenizer.encode(text) for text in prompt]  # type: ignore[union-attr]
    return [_checked_ids(ids, vocab_size) for ids in prompt]  # type: ignore[arg-type]


def chat_prompt(
    messages: list[ChatMessage], tokenizer: Any, tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """Render the model's chat template (with ``tools`` offered) and tokenize it without adding
    special tokens twice."""
    return tokenizer.encode(render_chat(messages, tokenizer, tools), add_special_tokens=False)


def _checked_ids(ids: list[int], vocab_size: int) -> list[int]:
    bad = next((token for token in ids if not 0 <= token < vocab_size), None)
    if bad is not None:
        raise APIError(
            400, f"Token id {bad} is outside the vocabulary (0..{vocab_size - 1}).", param="prompt"
        )
    return ids


def completion_budget(
    prompt_tokens: int, requested: int | None, max_model_len: int, default: int
) -> int:
    """Tokens to generate; a prompt that leaves no room is a 400 naming both numbers."""
    if prompt_tokens >= max_model_len:
        raise APIError(
            400,
            f"This model's maximum context length is {max_model_len} tokens, but the prompt "
            f"has {prompt_tokens} tokens. Shorten the prompt.",
            param="prompt",
            code="context_length_exceeded",
        )
    room = max_model_len - prompt_tokens
    if requested is None:
        return min(default, room)
    if requested > room:
        raise APIError(
            400,
            f"This model's maximum context length is {max_model_len} tokens, but "
            f"{prompt_tokens + requested} were requested ({prompt_tokens} in the prompt, "
            f"{requested} for the completion). Reduce the prompt or max_tokens.",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return requested
