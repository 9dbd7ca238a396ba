"""The objects of one ``/v1/responses`` answer, built with the ``openai`` package's own models:
the ``file_search_call`` item, the assistant message with its ``file_citation`` annotations, the
``function_call`` items of the model's calls, the usage and the ``Response`` that holds them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import (
    Response,
    ResponseFileSearchToolCall,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseUsage,
)

from gateway.openai.objects import dump
from gateway.openai.response_request import ResponsesTurn
from gateway.openai.search import FoundChunk
from gateway.openai.tool_calls import ReadAnswer, read_answer
from gateway.openai.tools import ToolCalling
from gateway.outputs import FinishedChoice, Usage


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage_object(usage: Usage) -> dict[str, Any]:
    """``input_tokens_details.cached_tokens``: prompt tokens whose KV came from the chunk store
    (blended documents) or vLLM's prefix cache."""
    return dump(
        ResponseUsage(
            input_tokens=usage.prompt_tokens,
            input_tokens_details={"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},  # type: ignore[arg-type]
            output_tokens=usage.completion_tokens,
            output_tokens_details={"reasoning_tokens": 0},  # type: ignore[arg-type]
            total_tokens=usage.prompt_tokens + usage.completion_tokens,
        )
    )


@dataclass
class ResponseBuilder:
    """One answer's ids and parts; ``body`` gives the finished response (and keeps it)."""

    turn: ResponsesTurn
    found: list[FoundChunk] | None
    """The chunks ``file_search`` placed in the prompt; None without ``file_search``."""
    calling: ToolCalling | None = None
    """The function tools offered; None without any."""
    tokenizer: Any = None
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    search_id: str = field(default_factory=lambda: new_id("fs"))
    message_id: str = field(default_factory=lambda: new_id("msg"))
    final: dict[str, Any] | None = None

    @property
    def message_index(self) -> int:
        return 0 if self.found is None else 1

    def search_item(self, status: str) -> dict[str, Any] | None:
        if self.found is None:
            return None
        done = status == "completed" and self.turn.include_results
        results = [chunk.result() for chunk in self.found] if done else None
        return dump(
            ResponseFileSearchToolCall(
                id=self.search_id,
                type="file_search_call",
                status=status,  # type: ignore[arg-type]
                queries=[self.turn.question],
                results=results,  # type: ignore[arg-type]
            )
        )

    def citations(self, text: str) -> list[dict[str, Any]]:
        """One ``file_citation`` per file the answer was given, best first, at the text's end."""
        files = {chunk.file.file_id: chunk.file.filename for chunk in self.found or []}
        return [
            {"type": "file_citation", "file_id": file_id, "filename": name, "index": len(text)}
            for file_id, name in files.items()
        ]

    def text_part(self, text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}

    def message_item(self, text: str, status: str, annotations: list[dict[str, Any]]) -> dict:
        parts = [] if status == "in_progress" else [self.text_part(text, annotations)]
        return dump(
            ResponseOutputMessage(
                id=self.message_id,
                type="message",
                role="assistant",
                status=status,  # type: ignore[arg-type]
                content=parts,  # type: ignore[arg-type]
            )
        )

    def function_item(self, call: dict[str, Any], status: str) -> dict[str, Any]:
        """A call as a ``function_call`` item; its item id follows from the call id."""
        return dump(
            ResponseFunctionToolCall(
                id=f"fc_{call['id'].removeprefix('call_')}",
                call_id=call["id"],
                type="function_call",
                name=call["function"]["name"],
                arguments=call["function"]["arguments"],
                status=status,  # type: ignore[arg-type]
            )
        )

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: Usage | None = None,
        truncated: bool = False,
    ) -> dict[str, Any]:
        turn = self.turn
        searches = [] if turn.file_search is None else [turn.file_search.tool]
        tools = searches + turn.function_tools
        return dump(
            Response(
                id=self.id,
                object="response",
                created_at=self.created_at,
                status=status,  # type: ignore[arg-type]
                completed_at=int(time.time()) if status != "in_progress" else None,
                error=None,
                incomplete_details={"reason": "max_output_tokens"} if truncated else None,  # type: ignore[arg-type]
                instructions=turn.instructions,
                max_output_tokens=turn.max_output_tokens,
                model=turn.model,
                output=output,  # type: ignore[arg-type]
                parallel_tool_calls=turn.parallel_tool_calls,
                previous_response_id=turn.previous_response_id,
                temperature=1.0 if turn.temperature is None else turn.temperature,
                top_p=1.0 if turn.top_p is None else turn.top_p,
                tool_choice=turn.tool_choice,
                tools=tools,  # type: ignore[arg-type]
                text={"format": turn.text_format},  # type: ignore[arg-type]
                truncation="disabled",
                usage=None if usage is None else usage_object(usage),  # type: ignore[arg-type]
                metadata=turn.metadata,
                store=turn.store,
            )
        )

    def finished(
        self,
        text: str,
        finish_reason: str | None,
        usage: Usage,
        answer: ReadAnswer | None = None,
    ) -> dict[str, Any]:
        """The whole response once the text is complete; kept as ``final``. ``answer`` is the
        text read for calls (a stream's own reading), else read here when tools were offered."""
        truncated = finish_reason == "length"
        status = "incomplete" if truncated else "completed"
        if answer is None:
            calling = self.calling
            whole = ReadAnswer(text)
            answer = whole if calling is None else read_answer(calling, text, self.tokenizer)
        output = [] if (search := self.search_item("completed")) is None else [search]
        content = answer.content or ""
        if content or not answer.calls:
            output.append(self.message_item(content, status, self.citations(content)))
        output += [self.function_item(call, status) for call in answer.calls]
        self.final = self.response(status, output, usage, truncated)
        return self.final

    def body(self, choices: list[FinishedChoice], usage: Usage) -> dict[str, Any]:
        """The non-streamed answer (``gateway.serve.respond.BodyFormat``)."""
        choice = choices[0] if choices else FinishedChoice(0)
        return self.finished(choice.text, choice.finish_reason, usage)
