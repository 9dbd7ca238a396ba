"""Function tools on ``/v1/responses``: Responses-shaped ``function`` tools as chat's tool specs,
the ``tool_choice`` they get, and ``function_call`` / ``function_call_output`` input items as the
assistant calls and ``tool`` messages of the conversation (the chat template renders both)."""

from __future__ import annotations

from typing import Any

from openai.types.responses import FunctionTool
from pydantic import ValidationError

from gateway.http.errors import APIError
from gateway.openai.tool_types import (
    FunctionSpec,
    NamedFunction,
    NamedToolChoice,
    ToolChoice,
    ToolSpec,
)
from gateway.openai.validation import check_text, invalid


def function_tool(raw: dict[str, Any], param: str) -> ToolSpec:
    """``{"type": "function", "name", "parameters", ...}`` as chat's nested tool spec."""
    try:
        tool = FunctionTool.model_validate(raw)
        function = FunctionSpec(
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            strict=tool.strict,
        )
    except ValidationError as exc:
        raise invalid(exc, param) from None
    return ToolSpec(type="function", function=function)


def function_choice(tool_choice: Any) -> ToolChoice:
    """The ``tool_choice`` for the function tools: a forced ``file_search`` leaves them to the
    model (``auto``), a named function forces it."""
    if isinstance(tool_choice, str):
        return tool_choice if tool_choice in ("none", "auto", "required") else "auto"  # type: ignore[return-value]
    if tool_choice.get("type") == "function":
        name = tool_choice.get("name")
        if not isinstance(name, str):
            raise APIError(400, "'tool_choice' names no function.", param="tool_choice.name")
        return NamedToolChoice(type="function", function=NamedFunction(name=name))
    return "auto"


def call_message(item: dict[str, Any], param: str) -> dict[str, Any]:
    """A ``function_call`` item (an earlier answer's call, sent back) as an assistant turn."""
    call = {
        "id": check_text(item.get("call_id") or "", f"{param}.call_id"),
        "type": "function",
        "function": {
            "name": check_text(item.get("name") or "", f"{param}.name"),
            "arguments": check_text(item.get("arguments") or "{}", f"{param}.arguments"),
        },
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def output_message(item: dict[str, Any], param: str) -> dict[str, Any]:
    """A ``function_call_output`` item as the ``tool`` message answering its call."""
    output = item.get("output")
    if not isinstance(output, str):
        raise APIError(400, "Send the function's output as text.", param=f"{param}.output")
    call_id = check_text(item.get("call_id") or "", f"{param}.call_id")
    return {"role": "tool", "tool_call_id": call_id, "content": check_text(output, param)}


def merged_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive calls of one answer in one assistant turn, as chat sends them."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if previous and message.get("tool_calls") and previous.get("tool_calls"):
            merged[-1] = {**previous, "tool_calls": previous["tool_calls"] + message["tool_calls"]}
        else:
            merged.append(message)
    return merged


def assistant_turn(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A finished response's output as the assistant turn a later request continues from."""
    text = "".join(
        part.get("text", "")
        for item in output
        if item["type"] == "message"
        for part in item["content"]
    )
    calls = [
        {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        for item in output
        if item["type"] == "function_call"
    ]
    return {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}
