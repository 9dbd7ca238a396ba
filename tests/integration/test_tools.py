"""Tool calling through the OpenAI SDK on the real SmolLM2 server: ``required`` and named
``tool_choice`` give valid calls (guided decoding), streamed or not; a tool result is answered
in text; tools with ``documents`` still reuse every cached chunk; and ``/v1/responses`` returns
a ``function_call`` item and takes its output back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import BadRequestError, OpenAI

from tests.integration.conftest import Server

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def _ask(client: OpenAI, server: Server, **extra: Any) -> Any:
    return client.chat.completions.create(
        model=server.model,
        messages=extra.pop("messages", QUESTION),
        tools=[WEATHER, TIME],
        max_tokens=extra.pop("max_tokens", 40),
        temperature=0,
        **extra,
    )


def _check_call(name: str, arguments: str) -> None:
    parsed = json.loads(arguments)
    if name == "get_weather":
        assert set(parsed) == {"city"} and isinstance(parsed["city"], str)
    else:
        assert parsed == {"zone": parsed["zone"]} and parsed["zone"] in ("UTC", "CET")


@pytest.mark.parametrize("choice", ["required", NAMED])
def test_required_and_named_choices_return_a_valid_call(
    client: OpenAI, server: Server, choice: Any
) -> None:
    reply = _ask(client, server, tool_choice=choice, parallel_tool_calls=False)
    answer = reply.choices[0]
    assert answer.finish_reason == "tool_calls"
    assert answer.message.content is None
    [call] = answer.message.tool_calls
    assert call.type == "function" and call.id
    if choice != "required":
        assert call.function.name == "get_time"
    _check_call(call.function.name, call.function.arguments)


@pytest.mark.parametrize("choice", ["required", NAMED])
def test_streamed_calls_open_with_the_name_then_stream_the_arguments(
    client: OpenAI, server: Server, choice: Any
) -> None:
    stream = _ask(client, server, tool_choice=choice, parallel_tool_calls=False, stream=True)
    deltas, finish = [], None
    for chunk in stream:
        for part in chunk.choices:
            deltas += part.delta.tool_calls or []
            finish = part.finish_reason or finish
    assert finish == "tool_calls"
    first = deltas[0]
    assert first.index == 0 and first.id and first.type == "function"
    assert first.function.name and first.function.arguments == ""
    assert all(delta.index == 0 and delta.function.name is None for delta in deltas[1:])
    arguments = "".join(delta.function.arguments or "" for delta in deltas)
    if choice != "required":
        assert first.function.name == "get_time"
    _check_call(first.function.name, arguments)


def test_a_tool_result_is_answered_in_text(client: OpenAI, server: Server) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 degrees."},
    ]
    reply = _ask(client, server, messages=messages, tool_choice="none", max_tokens=16)
    answer = reply.choices[0]
    assert answer.message.tool_calls is None
    assert answer.message.content and answer.finish_reason in ("stop", "length")


def test_tools_with_documents_reuse_every_cached_chunk(client: OpenAI, server: Server) -> None:
    documents = [
        "Paris is the capital of France. Its weather is mild in spring.",
        "Berlin is the capital of Germany. It rains there often in autumn.",
    ]
    extra = {"documents": documents, "blend": {"mode": "blend"}}
    for system in ("You are terse.", "You answer travellers."):  # nothing for the prefix cache
        messages = [{"role": "system", "content": system}, *QUESTION]
        reply = _ask(
            client, server, messages=messages, tool_choice=NAMED, max_tokens=20, extra_body=extra
        )
    blend = reply.model_extra["blend"]
    assert blend["chunks_hit"] == 3 and blend["chunks_missed"] == 0  # the tool catalog's too
    assert blend["tool_block"]["source"] == "chunk_store"
    _check_call("get_time", reply.choices[0].message.tool_calls[0].function.arguments)


def test_a_tool_choice_naming_a_missing_function_is_400(client: OpenAI, server: Server) -> None:
    missing = {"type": "function", "function": {"name": "nowhere"}}
    with pytest.raises(BadRequestError) as caught:
        _ask(client, server, tool_choice=missing)
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict) and caught.value.body["param"] == "tool_choice"


RESPONSES_TIME = {"type": "function", **TIME["function"], "strict": True}  # type: ignore[dict-item]
NAMED_RESPONSES = {"type": "function", "name": "get_time"}


def test_responses_return_a_function_call_and_take_its_output(
    client: OpenAI, server: Server
) -> None:
    first = client.responses.create(
        model=server.model,
        input="What time is it in Paris?",
        tools=[RESPONSES_TIME],  # type: ignore[list-item]
        tool_choice=NAMED_RESPONSES,  # type: ignore[arg-type]
        max_output_tokens=20,
        temperature=0,
    )
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_time" and call.call_id
    _check_call("get_time", call.arguments)
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "09:30"}
    second = client.responses.create(
        model=server.model,
        previous_response_id=first.id,
        input=[output],  # type: ignore[list-item]
        tools=[RESPONSES_TIME],  # type: ignore[list-item]
        tool_choice="none",
        max_output_tokens=12,
        temperature=0,
    )
    assert second.output[-1].type == "message" and second.output_text


def test_streamed_responses_announce_the_call_then_its_arguments(
    client: OpenAI, server: Server
) -> None:
    events = list(
        client.responses.create(
            model=server.model,
            input="What time is it in Paris?",
            tools=[RESPONSES_TIME],  # type: ignore[list-item]
            tool_choice="required",
            parallel_tool_calls=False,  # else the small model keeps adding calls to the array
            max_output_tokens=40,
            temperature=0,
            stream=True,
        )
    )
    kinds = [event.type for event in events]
    added = kinds.index("response.output_item.added")
    assert events[added].item.type == "function_call"  # type: ignore[union-attr]
    arguments = "".join(
        event.delta for event in events if event.type == "response.function_call_arguments.delta"
    )
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == arguments  # type: ignore[union-attr]
    _check_call("get_time", arguments)
    assert kinds[-1] == "response.completed"
    final = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in final.output] == ["function_call"]
