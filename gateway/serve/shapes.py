"""How a request's own text becomes token ids: a chat (messages through the template, tools
offered) or a completion (one prompt string, or token ids and lists of prompts).

A shape answers the three questions ``plan_turn`` asks of every request, whatever its route:
the prompt with chunks placed before the question, the prompt with the passages the server
knows found pasted in it, and the prompt as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gateway.openai.protocol import ChatMessage, PromptInput
from gateway.rag.chunked_prompt import (
    ChunkedPrompt,
    Chunks,
    chat_with_chunks,
    chat_with_tools,
    completion_with_chunks,
)
from gateway.rag.pasted_prompt import PastedPrompt
from gateway.rag.prompts import completion_prompts
from gateway.serve.pasted import pasted_chat, pasted_completion
from gateway.state import AppState
from retriever import Tenant


class PromptShape(Protocol):
    question: str
    """What retrieval searches for: the last user message, or the completion prompt."""
    takes_chunks: bool
    """Whether chunks can be placed in it (a completion needs its prompt as one string)."""

    def with_chunks(self, chunks: Chunks) -> ChunkedPrompt:
        """The prompt with ``chunks`` placed before the question."""
        ...

    async def pasted(self, state: AppState, tenant: Tenant) -> PastedPrompt:
        """The prompt with `tenant`'s known passages found in its text as chunks."""
        ...

    def plain(self) -> list[ChunkedPrompt]:
        """Each prompt as it is (a chat's tool catalog its one span)."""
        ...


@dataclass(frozen=True)
class ChatShape:
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None
    tokenizer: Any

    @property
    def question(self) -> str:
        questions = [message.text for message in self.messages if message.role == "user"]
        return questions[-1] if questions else ""

    @property
    def takes_chunks(self) -> bool:
        return True

    def with_chunks(self, chunks: Chunks) -> ChunkedPrompt:
        return chat_with_chunks(self.messages, chunks, self.tokenizer, self.tools)

    async def pasted(self, state: AppState, tenant: Tenant) -> PastedPrompt:
        return await pasted_chat(self.messages, self.tools, state, tenant)

    def plain(self) -> list[ChunkedPrompt]:
        return [chat_with_tools(self.messages, self.tokenizer, self.tools)]


@dataclass(frozen=True)
class CompletionShape:
    prompt: PromptInput
    text: str | None
    """The prompt as one string; None for token ids or several prompts (no chunks then)."""
    tokenizer: Any
    vocab_size: int

    @property
    def question(self) -> str:
        return self.text or ""

    @property
    def takes_chunks(self) -> bool:
        return self.text is not None

    def with_chunks(self, chunks: Chunks) -> ChunkedPrompt:
        assert self.text is not None, "chunks need the prompt as one string"
        return completion_with_chunks(self.text, chunks, self.tokenizer)

    async def pasted(self, state: AppState, tenant: Tenant) -> PastedPrompt:
        assert self.text is not None, "passages are found in the prompt as one string"
        return await pasted_completion(self.text, state, tenant)

    def plain(self) -> list[ChunkedPrompt]:
        prompts = completion_prompts(self.prompt, self.tokenizer, self.vocab_size)
        return [ChunkedPrompt(ids, ()) for ids in prompts]
