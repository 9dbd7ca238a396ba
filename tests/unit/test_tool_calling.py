"""Tool calling without an engine: request checks (400s naming the field), the guided JSON
schema, the prompt with tools for templates with and without tool support (chunks still before
the question), answers read into ``tool_calls`` and streamed as OpenAI streams them."""

from __future__ import annotations

import json
from typing import Any

import jinja2
import pytest

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatCompletionRequest
from gateway.openai.tool_calls import read_answer
from gateway.openai.tool_stream import ToolStream
from gateway.openai.tools import ToolCalling, tool_calling
from gateway.rag.chunked_prompt import Chunks, chat_with_chunks
from gateway.rag.prompts import chat_prompt

PLAIN = (  # SmolLM2's shape: no tools
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WITH_TOOLS = (  # Qwen2.5's shape, abridged: tools in the system turn
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}"
    "</tools><|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] }}{% for c in m.get('tool_calls', []) %}<tool_call>{{ c.function | tojson }}"
    "</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


class TemplateTokenizer:
    """Renders a chat template with jinja and encodes text one character per token."""

    def __init__(self, template: str) -> None:
        self.chat_template = template
        self.environment = jinja2.Environment()
        self.environment.filters["tojson"] = json.dumps

    def apply_chat_template(
        self, conversation: Any, tools: Any = None, add_generation_prompt: bool = False, **_: Any
    ) -> str:
        template = self.environment.from_string(self.chat_template)
        return template.render(
            messages=conversation, tools=tools, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(char) for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(token) for token in ids)


def _request(**fields: Any) -> ChatCompletionRequest:
    messages = fields.pop("messages", [{"role": "user", "content": "Weather in Paris?"}])
    return ChatCompletionRequest.model_validate({"model": "m", "messages": messages, **fields})


def _calling(choice: Any = None, parallel: bool = True, tools: Any = None) -> ToolCalling:
    body = _request(tools=tools or [WEATHER], tool_choice=choice, parallel_tool_calls=parallel)
    calling = tool_calling(body.tools, body.tool_choice, body.parallel_tool_calls, "hermes")
    assert calling is not None
    return calling


def _refused(**fields: Any) -> APIError:
    body = _request(**fields)
    with pytest.raises(APIError) as caught:
        tool_calling(body.tools, body.tool_choice, body.parallel_tool_calls, "hermes")
    assert caught.value.status == 400
    return caught.value


def test_bad_tools_and_choices_are_400s_naming_the_field() -> None:
    named = {"type": "function", "function": {"name": "missing"}}
    assert _refused(tools=[WEATHER], tool_choice=named).param == "tool_choice"
    assert _refused(tool_choice="required").param == "tool_choice"
    assert _refused(tools=[WEATHER, WEATHER]).param == "tools.1.function.name"
    bad = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": 3}},
    }
    assert _refused(tools=[bad]).param == "tools.0.function.parameters"


def test_none_offers_nothing_and_auto_is_the_default_with_tools() -> None:
    body = _request(tools=[WEATHER], tool_choice="none")
    assert tool_calling(body.tools, body.tool_choice, True, "hermes") is None
    assert _calling().choice == "auto" and _calling().guided_schema() is None


def test_required_and_named_choices_guide_decoding_to_json() -> None:
    required = _calling("required", parallel=False).guided_schema()
    assert required is not None and required["maxItems"] == 1
    [option] = required["items"]["anyOf"]
    assert option["properties"]["name"] == {"type": "string", "enum": ["get_weather"]}
    named = _calling({"type": "function", "function": {"name": "get_weather"}})
    assert named.guided_schema() == WEATHER["function"]["parameters"]


def test_a_template_without_tools_gets_them_in_the_system_message_hermes_style() -> None:
    tokenizer = TemplateTokenizer(PLAIN)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = _request(
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ]
    ).messages
    text = tokenizer.decode(chat_prompt(messages, tokenizer, _calling().template_tools()))
    assert text.startswith("<|im_start|>system\n# Tools") and '"name": "get_weather"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' in text
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>" in text


def test_a_template_with_tools_renders_them_and_chunks_stay_before_the_question() -> None:
    tokenizer = TemplateTokenizer(WITH_TOOLS)
    chunk = tokenizer.encode("Paris is sunny.\n\n")
    messages = _request().messages
    prompt = chat_with_chunks(messages, Chunks([chunk]), tokenizer, _calling().template_tools())
    text = tokenizer.decode(prompt.token_ids)
    [span] = prompt.spans
    assert prompt.token_ids[span.start : span.end] == chunk
    assert text.index("<tools>") < span.start and text[span.end :].startswith("Weather in")


def test_auto_answers_are_read_with_the_hermes_parser() -> None:
    tokenizer = TemplateTokenizer(WITH_TOOLS)
    answer = read_answer(_calling(), "Let me look. " + CALL, tokenizer)
    assert answer.content == "Let me look. "
    [call] = answer.calls
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert read_answer(_calling(), "Just text.", tokenizer).calls == []


def test_guided_answers_are_read_as_json_and_parallel_false_keeps_one_call() -> None:
    tokenizer = TemplateTokenizer(PLAIN)
    array = json.dumps([{"name": "get_weather", "parameters": {"city": c}} for c in "AB"])
    assert len(read_answer(_calling("required"), array, tokenizer).calls) == 2
    assert len(read_answer(_calling("required", parallel=False), array, tokenizer).calls) == 1
    named = _calling({"type": "function", "function": {"name": "get_weather"}})
    [call] = read_answer(named, ' {"city": "A"}', tokenizer).calls
    assert call["function"]["arguments"] == '{"city": "A"}'


@pytest.mark.parametrize(
    ("choice", "text"),
    [
        (None, "Sure. " + CALL),
        ("required", '[{"name": "get_weather", "parameters": {"city": "Paris"}}]'),
        ({"type": "function", "function": {"name": "get_weather"}}, '{"city": "Paris"}'),
    ],
)
def test_streamed_calls_open_with_id_and_name_then_send_argument_fragments(
    choice: Any, text: str
) -> None:
    stream = ToolStream(_calling(choice), TemplateTokenizer(WITH_TOOLS))
    entries = []
    for start in range(0, len(text), 4):
        entries += stream.feed(text[start : start + 4]).calls
    entries += stream.finish().calls
    first, rest = entries[0], entries[1:]
    assert first["index"] == 0 and first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert all(set(entry) == {"index", "function"} for entry in rest)
    arguments = "".join(entry["function"]["arguments"] for entry in rest)
    assert json.loads(arguments) == {"city": "Paris"}
    assert stream.answer().calls[0]["id"] == first["id"]
