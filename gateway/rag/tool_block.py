"""The tool catalog in a chat prompt as a chunk, so its KV is reused behind any system prompt.

Chat front ends send the same dozens of tools with every message, and the chat template writes
them after the system text: a new chat, a changed system prompt or another user's session leaves
vLLM's prefix cache nothing to reuse. The rendered catalog (the "tool block") is a span of
fixed text, like a passage; placed as a chunk, its stored KV is re-rotated to wherever it lands.

The block is found by rendering the template twice around sentinel messages, with the tools and
without them: what the tools add, trimmed of surrounding blank space, is the block, whatever the
template (Qwen's native one, or the hermes block ragblend writes for templates without tools).
The prompt is then tokenized piece by piece: the text before the block, the block alone (so its
ids are the same in every prompt that carries it), and the text after it; still a tokenization
of the very same text.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from itertools import takewhile
from typing import Any

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage
from gateway.openai.tool_prompt import render_chat

_SYSTEM = "\u2063ragblend-system\u2063"
_USER = "\u2063ragblend-user\u2063"
_REMEMBERED = 64
"""Catalogs whose block is remembered (rendering a template twice over 40 tools takes
milliseconds)."""


_blocks: OrderedDict[tuple[int, str], str | None] = OrderedDict()


def tool_block(tokenizer: Any, tools: list[dict[str, Any]] | None) -> str | None:
    """The block ``tools`` add to a chat prompt; None without tools, or when the template
    writes them in more than one place or around the messages' own text."""
    if not tools or not getattr(tokenizer, "chat_template", None):
        return None
    cache_key = (id(tokenizer), json.dumps(tools, sort_keys=True, ensure_ascii=False))
    if cache_key in _blocks:
        _blocks.move_to_end(cache_key)
        return _blocks[cache_key]
    block = _blocks[cache_key] = _added_text(tokenizer, tools)
    if len(_blocks) > _REMEMBERED:
        _blocks.popitem(last=False)
    return block


def _added_text(tokenizer: Any, tools: list[dict[str, Any]]) -> str | None:
    system = ChatMessage(role="system", content=_SYSTEM)
    user = ChatMessage(role="user", content=_USER)
    try:
        with_tools = render_chat([system, user], tokenizer, tools)
        without = render_chat([system, user], tokenizer)
    except APIError:  # a template that needs more than a system and a user message
        return None
    same_start = _same_length(with_tools, without)
    same_end = _same_length(with_tools[same_start:][::-1], without[same_start:][::-1])
    added = with_tools[same_start : len(with_tools) - same_end]
    removed = without[same_start : len(without) - same_end]
    if removed or _SYSTEM in added or _USER in added:
        return None  # not one insertion of text of its own
    return added.strip() or None


def _same_length(first: str, second: str) -> int:
    """How many leading characters two texts share."""
    pairs = zip(first, second, strict=False)
    return sum(1 for _ in takewhile(lambda pair: pair[0] == pair[1], pairs))


def find_block(text: str, block: str | None) -> tuple[int, int] | None:
    """Where ``block`` stands in a rendered prompt (its first place), never at the start: a chunk
    there would replace the attention sink every cached chunk was computed behind."""
    if block is None:
        return None
    start = text.find(block)
    if start <= 0:
        return None
    return start, start + len(block)
