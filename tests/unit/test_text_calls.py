"""Calls a small model wrote as plain JSON text: read when the whole answer is such a call to an
offered tool with valid arguments, never from prose; streamed answers hold such text back and
end as calls, or as the content they were."""

from __future__ import annotations

import json
from typing import Any

from gateway.openai.text_calls import calls_in_text
from gateway.openai.tool_calls import read_answer
from gateway.openai.tool_stream import ToolStream
from gateway.openai.tool_types import ToolSpec
from gateway.openai.tools import tool_calling
from tests.unit.test_tool_calling import WITH_TOOLS, TemplateTokenizer

AREA = {
    "type": "function",
    "function": {
        "name": "triangle_area",
        "parameters": {
            "type": "object",
            "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
            "required": ["base", "height"],
        },
    },
}
TOOLS = [ToolSpec.model_validate(AREA)]
FENCED = '```json\n{\n  "name": "triangle_area",\n  "arguments": {"base": 10, "height": 5}\n}\n```'


def test_a_fenced_or_bare_call_to_an_offered_tool_is_read() -> None:
    assert calls_in_text(FENCED, TOOLS) == [("triangle_area", '{"base": 10, "height": 5}')]
    bare = '[{"name": "triangle_area", "parameters": {"base": 1, "height": 2}}, ' \
           '{"name": "triangle_area", "arguments": {"base": 3, "height": 4}}]'  # fmt: skip
    assert [name for name, _ in calls_in_text(bare, TOOLS)] == ["triangle_area"] * 2


def test_prose_unknown_tools_and_bad_arguments_are_not_calls() -> None:
    assert calls_in_text("Use this:\n" + FENCED, TOOLS) == []
    assert calls_in_text(FENCED.replace("triangle_area", "circle_area"), TOOLS) == []
    assert calls_in_text(FENCED.replace("10", '"ten"'), TOOLS) == []
    assert calls_in_text('{"name": "triangle_area"}', TOOLS) == []  # required arguments missing
    assert calls_in_text('{"name": "triangle_area", "arguments": {"base": 1, "height": 2}, '
                         '"note": "x"}', TOOLS) == []  # fmt: skip
    assert calls_in_text("The area is 25.", TOOLS) == []
    assert calls_in_text("```json\n{oops\n```", TOOLS) == []


def _calling(from_text: bool) -> Any:
    return tool_calling(TOOLS, None, True, "hermes", from_text=from_text)


def test_auto_answers_read_text_calls_only_when_asked() -> None:
    tokenizer = TemplateTokenizer(WITH_TOOLS)
    answer = read_answer(_calling(True), FENCED, tokenizer)
    assert answer.content is None
    assert [call["function"]["name"] for call in answer.calls] == ["triangle_area"]
    assert read_answer(_calling(False), FENCED, tokenizer).calls == []


def _streamed(text: str) -> tuple[str, list[dict[str, Any]]]:
    stream = ToolStream(_calling(True), TemplateTokenizer(WITH_TOOLS))
    content, calls = "", []
    for start in range(0, len(text), 5):
        piece = stream.feed(text[start : start + 5])
        content, calls = content + piece.content, calls + piece.calls
    end = stream.finish()
    return content + end.content, calls + end.calls


def test_a_streamed_text_call_ends_as_a_call_without_content() -> None:
    content, entries = _streamed(FENCED)
    assert content == ""
    assert entries[0]["function"]["name"] == "triangle_area"
    arguments = "".join(entry["function"]["arguments"] for entry in entries)
    assert json.loads(arguments) == {"base": 10, "height": 5}


def test_streamed_code_that_is_no_call_is_sent_whole_and_prose_flows_at_once() -> None:
    code = "```python\nprint(10 * 5 / 2)\n```"
    assert _streamed(code) == (code, [])
    stream = ToolStream(_calling(True), TemplateTokenizer(WITH_TOOLS))
    assert stream.feed("The area").content == "The area"
