"""The prompt of a ``/v1/responses`` turn: the conversation through the chat template, with the
chunks ``file_search`` found placed as blended documents before the last user message, exactly
as chat's ``retrieval`` places them (stored token ids, so their cached KV is reused)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.contract import BlendPlan
from gateway.openai.protocol import ChatMessage
from gateway.openai.response_request import ResponsesTurn
from gateway.openai.search import FoundChunk
from gateway.rag.blending import blend_plan
from gateway.rag.chunked_prompt import (
    ChunkContext,
    chat_with_chunks,
    chat_with_tools,
    stored_chunks,
)
from gateway.state import AppState


@dataclass(frozen=True)
class AnswerPrompt:
    token_ids: list[int]
    plan: BlendPlan | None
    placed: list[FoundChunk] | None
    """The chunks in the prompt, best first; None without ``file_search``."""
    context: ChunkContext = "cold"
    """What the chunks' KV was computed in."""
    tool_span: int | None = None
    """Which of the plan's spans is the tool catalog."""


def conversation(turn: ResponsesTurn, history: list[dict[str, Any]]) -> list[ChatMessage]:
    """The instructions (this turn's only), the earlier turns, then this turn's input."""
    system = [] if turn.instructions is None else [{"role": "system", "content": turn.instructions}]
    return [ChatMessage.model_validate(message) for message in system + history + turn.messages]


def answer_prompt(
    messages: list[ChatMessage],
    found: list[FoundChunk] | None,
    state: AppState,
    room: int,
    tools: list[dict[str, Any]] | None = None,
) -> AnswerPrompt:
    """The prompt (``tools`` offered, their catalog a chunk) with as many of the best chunks as
    leave ``room`` tokens to answer in."""
    tokenizer, engine = state.tokenizer, state.engine
    assert engine is not None
    if not found:
        with_tools = chat_with_tools(messages, tokenizer, tools)
        if not with_tools.spans or not engine.blending:
            return AnswerPrompt(with_tools.token_ids, None, found)
        plan = blend_plan(with_tools, None, state.settings, True, "tools")
        return AnswerPrompt(with_tools.token_ids, plan, found, "tools", with_tools.tool_span)
    limit = engine.max_model_len - room
    placed = list(found)
    while True:
        chunks = stored_chunks([chunk.hit.token_ids for chunk in placed], tokenizer)
        prompt = chat_with_chunks(messages, chunks, tokenizer, tools)
        if len(prompt.token_ids) <= limit or len(placed) == 1:
            break
        placed.pop()
    context: ChunkContext = "library" if state.neighbour_contexts else "cold"
    plan = blend_plan(prompt, None, state.settings, engine.blending, context)
    return AnswerPrompt(prompt.token_ids, plan, placed, context, prompt.tool_span)


def answer_room(turn: ResponsesTurn, state: AppState) -> int:
    """Tokens kept free for the answer when chunks are placed."""
    return turn.max_output_tokens or state.settings.max_tokens_default
