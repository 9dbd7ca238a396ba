"""Read a finished answer's tool calls into OpenAI's ``tool_calls``.

``auto`` answers go through vLLM's tool parser for the model (``ToolParserManager``, the same
``extract_tool_calls`` vLLM's chat server calls); the JSON that guided decoding produced for
``required`` (an array of ``{"name", "parameters"}``) and for a named function (its arguments)
is read directly, as vLLM reads it. ``parallel_tool_calls: false`` keeps the first call. An
``auto`` answer without a call in the model's syntax may be one written as plain JSON
(``RAGBLEND_TOOL_CALLS_FROM_TEXT``, `gateway.openai.text_calls`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers import ToolParser, ToolParserManager

from gateway.openai.text_calls import calls_in_text
from gateway.openai.tools import ToolCalling


def call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_call(name: str, arguments: str, identifier: str | None = None) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"id": identifier or call_id(), "type": "function", "function": function}


@dataclass(frozen=True)
class ReadAnswer:
    content: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ModelParser:
    """A vLLM tool parser and the request object its methods take."""

    parser: ToolParser
    request: ChatCompletionRequest


def model_parser(calling: ToolCalling, tokenizer: Any) -> ModelParser:
    """A fresh parser (vLLM's streaming parsers keep state: one per choice)."""
    request = ChatCompletionRequest(
        model="", messages=[], tools=calling.template_tools(), tool_choice="auto"
    )
    parser_class = ToolParserManager.get_tool_parser(calling.parser)
    return ModelParser(parser_class(tokenizer, request.tools), request)


def read_answer(calling: ToolCalling, text: str, tokenizer: Any) -> ReadAnswer:
    """The content and the calls of a whole answer."""
    if calling.choice == "named":
        assert calling.function is not None
        arguments = text.strip()
        if not arguments:
            return ReadAnswer(None)
        return ReadAnswer(None, [tool_call(calling.function, arguments)])
    if calling.choice == "required":
        calls = [tool_call(name, arguments) for name, arguments in required_calls(text)]
        answer = ReadAnswer(None if calls else text or None, calls)
    else:
        answer = _parsed(model_parser(calling, tokenizer), text)
        written = calls_in_text(text, calling.tools) if calling.from_text else []
        if not answer.calls and written:
            answer = ReadAnswer(None, [tool_call(name, arguments) for name, arguments in written])
    return answer if calling.parallel else ReadAnswer(answer.content, answer.calls[:1])


def required_calls(text: str) -> list[tuple[str, str]]:
    """``(name, arguments)`` of a complete ``required`` array; empty when it does not parse."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    return [
        (item["name"], json.dumps(item.get("parameters", {}), ensure_ascii=False))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


def _parsed(model: ModelParser, text: str) -> ReadAnswer:
    extracted = model.parser.extract_tool_calls(text, model.request)
    if not extracted.tools_called:
        return ReadAnswer(text)
    calls = [
        tool_call(call.function.name, call.function.arguments)
        for call in extracted.tool_calls
        if call.function is not None
    ]
    content = extracted.content if extracted.content and extracted.content.strip() else None
    return ReadAnswer(content, calls)
