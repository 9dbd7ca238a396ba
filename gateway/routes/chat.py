"""``POST /v1/chat/completions``, with function tools: offered through the chat template, the
answer's calls read into ``tool_calls`` (streamed as ``delta.tool_calls``), ``required`` and a
named ``tool_choice`` enforced by guided decoding."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from gateway.http.admission import check_choice_count
from gateway.openai.protocol import ChatCompletionRequest
from gateway.openai.tool_calls import read_answer
from gateway.openai.tool_stream import StreamPiece, ToolStream
from gateway.openai.tools import ToolCalling, parser_name, tool_calling
from gateway.outputs import ChoiceDelta, FinishedChoice, TokenLogprob, Usage
from gateway.rag.pasted_prompt import segmenting
from gateway.serve.plan import TurnAsk, plan_turn
from gateway.serve.respond import PreparedRequest, respond, response_id
from gateway.serve.shapes import ChatShape
from gateway.state import CurrentState, RequestTenant, authorized, check_model, ready_state

router = APIRouter(dependencies=[Depends(authorized)])


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatCompletionRequest, request: Request, state: CurrentState, tenant: RequestTenant
) -> Response:
    """The request's own checks come first: a bad request is a 400 even while the model loads."""
    arrived = time.perf_counter()
    check_model(body.model, state)
    check_choice_count(1, body.n, state.settings.max_choices_per_request)
    parser = parser_name(state.settings.tool_parser, state.settings.model)
    from_text = state.settings.tool_calls_from_text
    calling = tool_calling(
        body.tools, body.tool_choice, body.parallel_tool_calls, parser, from_text=from_text
    )
    tools = None if calling is None else calling.template_tools()
    segment = segmenting(body, state.settings, one_text=True)
    ready_state(request)  # 503 while the model loads or once the engine stopped
    shape = ChatShape(body.messages, tools, state.tokenizer)
    ask = TurnAsk(body.blend, body.document_texts, body.retrieval, segment)
    turn = await plan_turn(shape, ask, state, tenant)
    top_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    completion_id, created = response_id("chatcmpl")
    response_format = ChatFormat(completion_id, created, body.model, calling, state.tokenizer)
    guided = None if calling is None else calling.structured_outputs()
    prepared = PreparedRequest(body, turn, top_logprobs, arrived, guided)
    return await respond(request, state, prepared, response_format)


@dataclass
class ChatFormat:
    completion_id: str
    created: int
    model: str
    calling: ToolCalling | None = None
    tokenizer: Any = None
    _opened: set[int] = field(default_factory=set)
    _streams: dict[int, ToolStream] = field(default_factory=dict)

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def chunks(self, delta: ChoiceDelta) -> list[dict[str, Any]]:
        """The role first, then content, then an empty delta carrying the finish reason."""
        chunks = []
        if delta.index not in self._opened:
            self._opened.add(delta.index)
            opening = {"role": "assistant", "content": ""}
            chunks.append(self._chunk([_stream_choice(delta.index, opening, None, None)]))
        piece = self._piece(delta)
        if piece.content or delta.logprobs:
            content = {"content": piece.content}
            logprobs = _logprobs(delta.logprobs)
            chunks.append(self._chunk([_stream_choice(delta.index, content, logprobs, None)]))
        if piece.calls:
            calls = {"tool_calls": piece.calls}
            chunks.append(self._chunk([_stream_choice(delta.index, calls, None, None)]))
        if delta.finish_reason is not None:
            stream = self._streams.get(delta.index)
            finish = _finish_reason(delta.finish_reason, stream is not None and stream.called)
            chunks.append(self._chunk([_stream_choice(delta.index, {}, None, finish)]))
        return chunks

    def _piece(self, delta: ChoiceDelta) -> StreamPiece:
        """The delta's content and tool-call entries; the text as it is without tools."""
        if self.calling is None:
            return StreamPiece(delta.text)
        stream = self._streams.get(delta.index)
        if stream is None:
            stream = self._streams[delta.index] = ToolStream(self.calling, self.tokenizer)
        piece = stream.feed(delta.text, delta.token_ids)
        if delta.finish_reason is None:
            return piece
        rest = stream.finish()
        return StreamPiece(piece.content + rest.content, piece.calls + rest.calls)

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        return {**self._chunk([]), "usage": usage.as_dict()}

    def body(self, choices: list[FinishedChoice], usage: Usage) -> dict[str, Any]:
        rendered = [self._choice(choice) for choice in choices]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": rendered,
            "usage": usage.as_dict(),
        }

    def _choice(self, choice: FinishedChoice) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": choice.text}
        finish = choice.finish_reason
        if self.calling is not None:
            answer = read_answer(self.calling, choice.text, self.tokenizer)
            message["content"] = answer.content
            if answer.calls:
                message["tool_calls"] = answer.calls
            finish = _finish_reason(finish, bool(answer.calls))
        return {
            "index": choice.index,
            "message": message,
            "logprobs": _logprobs(choice.logprobs),
            "finish_reason": finish,
        }


def _finish_reason(reason: str | None, called: bool) -> str | None:
    """``tool_calls`` when the answer ended on its own after calling tools."""
    return "tool_calls" if called and reason == "stop" else reason


def _stream_choice(
    index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None, finish: str | None
) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}


def _token(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _logprobs(entries: list[TokenLogprob] | None) -> dict[str, Any] | None:
    if entries is None:
        return None
    return {
        "content": [
            {
                **_token(entry.token, entry.logprob),
                "top_logprobs": [_token(token, logprob) for token, logprob in entry.top],
            }
            for entry in entries
        ]
    }
