"""``/v1/responses`` pieces without an engine: what a request asks for, and the stream of typed
events and the final response an SDK client receives."""

import json

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.http.errors import APIError
from gateway.openai.response_build import ResponseBuilder
from gateway.openai.response_request import parse_turn
from gateway.openai.search import FoundChunk
from gateway.outputs import Usage
from gateway.serve.response_events import EventWriter, closing_events, opening_events
from retriever.library.documents import Hit
from retriever.objects.vector_store_records import StoreFileRecord

TOOL = {"type": "file_search", "vector_store_ids": ["vs_1"]}


def turn(**body):
    return parse_turn({"model": "m", "input": "Who wrote it?", **body}, default_results=6)


def test_string_input_and_message_lists_become_chat_messages():
    assert turn().messages == [{"role": "user", "content": "Who wrote it?"}]
    listed = turn(
        input=[
            {"role": "developer", "content": "Be brief."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "file_search_call", "id": "fs_1", "queries": ["x"], "status": "completed"},
        ]
    )
    assert [m["role"] for m in listed.messages] == ["developer", "user"]
    assert listed.question == "Hi"


def test_file_search_tool_defaults_and_tool_choice_none():
    searched = turn(tools=[TOOL], include=["file_search_call.results"])
    assert searched.file_search.store_ids == ["vs_1"]
    assert searched.file_search.max_results == 6 and searched.include_results
    assert turn(tools=[TOOL], tool_choice="none").file_search is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools.0"),
        ({"tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools.0.vector_store_ids"),
        ({"tools": [{**TOOL, "max_num_results": 0}]}, "tools.0.max_num_results"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "detail": "auto"}]}]},
            "input.0.content.0",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        ({"temperature": "hot"}, "temperature"),
        ({"background": True}, "background"),
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 3}}}},
            "text.format.schema",
        ),
        ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"reasoning": {"effort": "high"}}, "reasoning"),
        ({"truncation": "auto"}, "truncation"),
        ({"temperatur": 0.5}, "temperatur"),
        ({"stream": "yes"}, "stream"),
        ({"input": ""}, "input"),
    ],
)
def test_what_is_not_served_is_a_400_naming_it(body, param):
    with pytest.raises(APIError) as refused:
        turn(**body)
    assert (refused.value.status, refused.value.param) == (400, param)


def found_chunk(file_id: str, score: float) -> FoundChunk:
    record = StoreFileRecord(
        file_id, "vs_1", f"{file_id}.txt", {"k": "v"}, 0, 9, "d", "cached", 1, "h"
    )
    return FoundChunk(record, Hit("d", 0, 1, score, "the passage", [1, 2], 0, 11))


def events_of(stream: list[str]) -> list:
    adapter = TypeAdapter(ResponseStreamEvent)
    parsed = []
    for message in stream:
        kind, data = message.removesuffix("\n\n").split("\n")
        event = adapter.validate_python(json.loads(data.removeprefix("data: ")))
        assert kind == f"event: {event.type}"
        parsed.append(event)
    return parsed


def test_stream_events_come_in_openai_order_and_end_with_the_cited_answer():
    builder = ResponseBuilder(
        turn(tools=[TOOL], include=["file_search_call.results"]),
        [found_chunk("file-a", 0.9), found_chunk("file-b", 0.5), found_chunk("file-a", 0.4)],
    )
    write = EventWriter()
    stream = list(opening_events(write, builder))
    stream.append(
        write(
            "response.output_text.delta",
            delta="Tolkien.",
            logprobs=[],
            item_id=builder.message_id,
            output_index=1,
            content_index=0,
        )
    )
    final = builder.finished("Tolkien.", "stop", Usage(100, 3, cached_tokens=80))
    stream += closing_events(write, builder, final)
    events = events_of(stream)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.annotation.added",
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    response: Response = events[-1].response
    assert response.output_text == "Tolkien."
    assert response.usage.input_tokens_details.cached_tokens == 80
    search, message = response.output
    assert [result.file_id for result in search.results] == ["file-a", "file-b", "file-a"]
    citations = message.content[0].annotations
    assert [(c.file_id, c.index) for c in citations] == [("file-a", 8), ("file-b", 8)]


def test_a_cut_answer_is_incomplete_and_results_need_include():
    builder = ResponseBuilder(turn(tools=[TOOL]), [found_chunk("file-a", 0.9)])
    final = Response.model_validate(builder.finished("Tol", "length", Usage(10, 1)))
    assert final.status == "incomplete"
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.output[0].results is None
