"""A streamed ``/v1/responses`` answer when function tools are offered.

The answer may be text, calls or text then calls, which only the text itself tells: the message
item opens with the first text, and each call opens a ``function_call`` item as soon as its name
is read (``response.output_item.added``), streams ``response.function_call_arguments.delta``
events, and closes with ``response.function_call_arguments.done`` and
``response.output_item.done``. The finished response holds the same ids and arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gateway.openai.response_build import ResponseBuilder
from gateway.openai.tool_stream import StreamPiece, ToolStream


class ToolEvents:
    """Turns a tool stream's pieces into events, numbering the output items as they open."""

    def __init__(self, write: Callable[..., str], builder: ResponseBuilder) -> None:
        """``write`` is ``gateway.serve.response_events.EventWriter``."""
        assert builder.calling is not None
        self.write = write
        self.builder = builder
        self.stream = ToolStream(builder.calling, builder.tokenizer)
        self.next_index = builder.message_index
        self.message_index: int | None = None
        self.call_indexes: dict[int, int] = {}
        """Output index of each call, by its index among the calls."""

    def feed(self, text: str, token_ids: Any) -> Iterator[str]:
        yield from self._piece(self.stream.feed(text, token_ids))

    def finish(self) -> Iterator[str]:
        yield from self._piece(self.stream.finish())

    def _piece(self, piece: StreamPiece) -> Iterator[str]:
        if piece.content:
            yield from self._open_message()
            yield self.write(
                "response.output_text.delta", delta=piece.content, logprobs=[], **self._at()
            )
        for entry in piece.calls:
            index = entry["index"]
            if "id" in entry:
                self.call_indexes[index] = self.next_index
                self.next_index += 1
                call = {"id": entry["id"], "function": entry["function"]}
                item = self.builder.function_item(call, "in_progress")
                yield self.write(
                    "response.output_item.added", item=item, output_index=self.call_indexes[index]
                )
            else:
                yield self.write(
                    "response.function_call_arguments.delta",
                    delta=entry["function"]["arguments"],
                    **self._call_at(index),
                )

    def _open_message(self) -> Iterator[str]:
        if self.message_index is not None:
            return
        self.message_index = self.next_index
        self.next_index += 1
        message = self.builder.message_item("", "in_progress", [])
        yield self.write(
            "response.output_item.added", item=message, output_index=self.message_index
        )
        yield self.write(
            "response.content_part.added", part=self.builder.text_part("", []), **self._at()
        )

    def closing(self, final: dict[str, Any]) -> Iterator[str]:
        """The ``.done`` events of every item opened, then the response's last event."""
        for item in final["output"]:
            if item["type"] == "message":
                yield from self._open_message()
                part = item["content"][0]
                yield self.write(
                    "response.output_text.done", text=part["text"], logprobs=[], **self._at()
                )
                yield self.write("response.content_part.done", part=part, **self._at())
                yield self.write(
                    "response.output_item.done", item=item, output_index=self.message_index
                )
            elif item["type"] == "function_call":
                index = self._call_index(item["call_id"])
                where = self._call_at(index)
                yield self.write(
                    "response.function_call_arguments.done",
                    arguments=item["arguments"],
                    name=item["name"],
                    **where,
                )
                yield self.write(
                    "response.output_item.done", item=item, output_index=where["output_index"]
                )
        closing = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield self.write(closing, response=final)

    def _call_index(self, call_id: str) -> int:
        return next(
            index
            for index, (identifier, _) in self.stream.announced.items()
            if identifier == call_id
        )

    def _at(self) -> dict[str, Any]:
        return {
            "item_id": self.builder.message_id,
            "output_index": self.message_index,
            "content_index": 0,
        }

    def _call_at(self, index: int) -> dict[str, Any]:
        identifier, _ = self.stream.announced[index]
        item_id = f"fc_{identifier.removeprefix('call_')}"
        return {"item_id": item_id, "output_index": self.call_indexes[index]}
