"""A streamed answer's tool calls as OpenAI streams them in ``delta.tool_calls``.

Each call opens with ``{"index", "id", "type": "function", "function": {"name", "arguments":
""}}`` and continues with ``{"index", "function": {"arguments": <fragment>}}``. ``auto`` answers
go through the model's vLLM parser (``extract_tool_calls_streaming``, as vLLM's chat server
calls it), ``required`` through vLLM's reader of the guided JSON array, and a named function's
guided arguments are streamed as they come. When the answer ends, whatever the parser held back
is sent: arguments the whole answer has beyond what was streamed, or a call never announced. An
``auto`` answer that opens like JSON is held back when calls written as text are read
(`gateway.openai.text_calls`): at its end it is sent as calls, or as the content it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm.entrypoints.generate.base.protocol import DeltaToolCall
from vllm.tool_parsers.streaming import extract_required_tool_call_streaming

from gateway.openai.tool_calls import ReadAnswer, call_id, model_parser, read_answer, tool_call
from gateway.openai.tools import ToolCalling


@dataclass(frozen=True)
class StreamPiece:
    content: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """``delta.tool_calls`` entries, in order."""


class ToolStream:
    """One choice's stream: feed each delta's text and token ids, then ``finish`` once."""

    def __init__(self, calling: ToolCalling, tokenizer: Any) -> None:
        self.calling = calling
        self.tokenizer = tokenizer
        self.model = model_parser(calling, tokenizer) if calling.choice == "auto" else None
        self.text = ""
        self.token_ids: list[int] = []
        self.sent: dict[int, str] = {}
        """Arguments streamed so far, by the index of each announced call."""
        self.announced: dict[int, tuple[str, str]] = {}
        """Each announced call's id and name."""
        self.content = ""
        self.held = ""
        """Content kept back while it may be a call written as plain JSON (`from_text`)."""
        self.flowing = not calling.from_text

    @property
    def called(self) -> bool:
        return bool(self.sent)

    def answer(self) -> ReadAnswer:
        """What was streamed, as a whole answer: the same ids and arguments."""
        calls = [
            tool_call(name, self.sent[index], identifier)
            for index, (identifier, name) in (sorted(self.announced.items()))
        ]
        return ReadAnswer(self.content or None, calls)

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> StreamPiece:
        previous, previous_ids = self.text, list(self.token_ids)
        self.text += text
        self.token_ids += token_ids
        if self.calling.choice == "named":
            return StreamPiece(calls=self._named())
        if self.calling.choice == "required":
            message, _ = extract_required_tool_call_streaming(
                previous_text=previous,
                current_text=self.text,
                tool_call_idx=None,
                tool_call_id_type="random",
            )
        else:
            assert self.model is not None
            message = self.model.parser.extract_tool_calls_streaming(
                previous,
                self.text,
                text,
                previous_ids,
                self.token_ids,
                token_ids,
                self.model.request,
            )
        if message is None:
            return StreamPiece()
        calls = [entry for call in message.tool_calls for entry in self._entries(call)]
        content = self._release(message.content or "")
        self.content += content
        return StreamPiece(content, calls)

    def _release(self, content: str) -> str:
        """What of ``content`` can be sent now: an answer that opens like JSON (or a fence) is
        held until it ends, when it is read as calls or sent as the text it is."""
        if self.flowing:
            return content
        self.held += content
        opening = self.held.lstrip()
        if not opening or opening.startswith(("```", "{", "[")) or "```".startswith(opening):
            return ""
        self.flowing, released, self.held = True, self.held, ""
        return released

    def finish(self) -> StreamPiece:
        """What the whole answer has that was not streamed yet."""
        if self.calling.choice == "named":
            return StreamPiece()
        entries = []
        calls = read_answer(self.calling, self.text, self.tokenizer).calls
        held, self.held = self.held, ""
        if held and (self.sent or not calls):  # not a call written as text: it was content
            self.content += held
        else:
            held = ""
        for index, call in enumerate(calls):
            function = call["function"]
            if index not in self.sent:
                entries += self._announce(index, function["name"])
            sent, arguments = self.sent[index], function["arguments"]
            if arguments.startswith(sent) and len(arguments) > len(sent):
                entries.append(self._arguments(index, arguments[len(sent) :]))
        return StreamPiece(held, entries)

    def _named(self) -> list[dict[str, Any]]:
        assert self.calling.function is not None
        arguments = self.text.lstrip()
        if not arguments:
            return []
        entries = [] if 0 in self.sent else self._announce(0, self.calling.function)
        new = arguments[len(self.sent[0]) :]
        return entries + ([self._arguments(0, new)] if new else [])

    def _entries(self, call: DeltaToolCall) -> list[dict[str, Any]]:
        index = call.index
        if index > 0 and not self.calling.parallel:
            return []
        function = call.function
        entries = []
        if index not in self.sent:
            if function is None or not function.name:
                return []  # arguments before a name: the parser has not found the call yet
            entries += self._announce(index, function.name)
        if function is not None and function.arguments:
            entries.append(self._arguments(index, function.arguments))
        return entries

    def _announce(self, index: int, name: str) -> list[dict[str, Any]]:
        self.sent[index] = ""
        identifier = call_id()
        self.announced[index] = (identifier, name)
        function = {"name": name, "arguments": ""}
        return [{"index": index, "id": identifier, "type": "function", "function": function}]

    def _arguments(self, index: int, fragment: str) -> dict[str, Any]:
        self.sent[index] += fragment
        return {"index": index, "function": {"arguments": fragment}}
