"""A streamed ``/v1/responses`` answer as OpenAI's typed server-sent events.

Every event is validated as the ``openai`` package's ``ResponseStreamEvent`` union, numbered by
``sequence_number`` and sent as ``event: <type>`` plus ``data: <json>``. The order is OpenAI's:
``response.created``, ``response.in_progress``, the ``file_search_call`` item and its steps,
the message item, its text part, ``response.output_text.delta`` events, the annotations, the
closing ``.done`` events, then ``response.completed`` (``response.incomplete`` when the token
limit cut the text). With function tools, ``gateway.openai.response_tool_events`` streams the
items instead. A failure ends the stream with an ``error`` event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from typing import Any

from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.http.shutdown import until_deadline
from gateway.openai.response_build import ResponseBuilder
from gateway.openai.response_tool_events import ToolEvents
from gateway.serve.respond import StartedGeneration, served_error

_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


class EventWriter:
    """Numbers, validates and encodes events."""

    def __init__(self) -> None:
        self.sequence_number = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        payload = {"type": kind, "sequence_number": self.sequence_number, **fields}
        event = _EVENTS.validate_python(payload)
        self.sequence_number += 1
        data = json.dumps(event.model_dump(mode="json", exclude_unset=True), ensure_ascii=False)
        return f"event: {kind}\ndata: {data}\n\n"


def opening_events(
    write: EventWriter, builder: ResponseBuilder, open_message: bool = True
) -> Iterator[str]:
    """Everything before the first token: the response, the finished search, the empty message
    (unless function tools may make the answer calls instead: ``ToolEvents`` opens it)."""
    opened = builder.response("in_progress", [])
    yield write("response.created", response=opened)
    yield write("response.in_progress", response=opened)
    searching = builder.search_item("in_progress")
    if searching is not None:
        where = {"item_id": builder.search_id, "output_index": 0}
        yield write("response.output_item.added", item=searching, output_index=0)
        for step in ("in_progress", "searching", "completed"):
            yield write(f"response.file_search_call.{step}", **where)
        yield write(
            "response.output_item.done", item=builder.search_item("completed"), output_index=0
        )
    if not open_message:
        return
    index = builder.message_index
    message = builder.message_item("", "in_progress", [])
    yield write("response.output_item.added", item=message, output_index=index)
    yield write("response.content_part.added", part=builder.text_part("", []), **_at(builder))


def closing_events(
    write: EventWriter, builder: ResponseBuilder, final: dict[str, Any]
) -> Iterator[str]:
    message = final["output"][-1]
    part = message["content"][0]
    for number, annotation in enumerate(part["annotations"]):
        yield write(
            "response.output_text.annotation.added",
            annotation=annotation,
            annotation_index=number,
            **_at(builder),
        )
    yield write("response.output_text.done", text=part["text"], logprobs=[], **_at(builder))
    yield write("response.content_part.done", part=part, **_at(builder))
    yield write("response.output_item.done", item=message, output_index=builder.message_index)
    closing = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield write(closing, response=final)


def _at(builder: ResponseBuilder) -> dict[str, Any]:
    return {
        "item_id": builder.message_id,
        "output_index": builder.message_index,
        "content_index": 0,
    }


async def response_events(
    builder: ResponseBuilder,
    started: StartedGeneration,
    deadline: asyncio.Event,
    keep: Callable[[dict[str, Any]], Awaitable[None]],
) -> AsyncIterator[str]:
    """The whole stream; ``keep`` stores the finished response before it is announced."""
    write = EventWriter()
    tools = None if builder.calling is None else ToolEvents(write, builder)
    try:
        for event in opening_events(write, builder, open_message=tools is None):
            yield event
        generation, text, finish_reason = started.generation, "", None
        try:
            async with aclosing(until_deadline(generation.deltas(), deadline)) as deltas:
                async for delta in deltas:
                    finish_reason = delta.finish_reason or finish_reason
                    if tools is not None:
                        for event in tools.feed(delta.text, delta.token_ids):
                            yield event
                    elif delta.text:
                        text += delta.text
                        yield write(
                            "response.output_text.delta",
                            delta=delta.text,
                            logprobs=[],
                            **_at(builder),
                        )
            answer = None
            if tools is not None:
                for event in tools.finish():
                    yield event
                answer = tools.stream.answer()
            final = builder.finished(text, finish_reason, generation.usage, answer)
            await keep(final)
        except Exception as exc:
            error = served_error(exc)
            yield write("error", code=error.code, message=error.message, param=error.param)
            return
        blend = generation.blend_summary()
        announced = final if blend is None else {**final, "blend": blend}
        if tools is None:
            ending = closing_events(write, builder, announced)
        else:
            ending = tools.closing(announced)
        for event in ending:
            yield event
    finally:
        started.finish()
