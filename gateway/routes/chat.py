"""``POST /v1/chat/completions``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from gateway.http.admission import check_choice_count
from gateway.http.serving import FinishedChoice, PreparedRequest, respond, response_id
from gateway.openai.protocol import ChatCompletionRequest
from gateway.rag.blending import blend_plan
from gateway.rag.chunked_prompt import chat_with_chunks
from gateway.rag.generation import ChoiceDelta, TokenLogprob, Usage
from gateway.rag.prompts import chat_prompt
from gateway.rag.retrieval import request_chunks
from gateway.state import CurrentState, authorized, check_model, ready_state

router = APIRouter(dependencies=[Depends(authorized)])


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatCompletionRequest, request: Request, state: CurrentState
) -> Response:
    """The request's own checks come first: a bad request is a 400 even while the model loads."""
    arrived = time.perf_counter()
    check_model(body.model, state)
    check_choice_count(1, body.n, state.settings.max_choices_per_request)
    ready_state(request)  # 503 while the model loads or once the engine stopped
    engine = state.engine
    assert engine is not None
    plan, sources = None, None
    questions = [message.text for message in body.messages if message.role == "user"]
    chunks = await request_chunks(body, questions[-1] if questions else "", state)
    if chunks is not None:
        chunked = chat_with_chunks(body.messages, chunks, state.tokenizer)
        plan = blend_plan(chunked, body.blend, state.settings, engine.blending, chunks.in_context)
        prompt, sources = chunked.token_ids, chunks.sources
    else:
        prompt = chat_prompt(body.messages, state.tokenizer)
    top_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    completion_id, created = response_id("chatcmpl")
    response_format = ChatFormat(completion_id, created, body.model)
    prepared = PreparedRequest(body, [prompt], plan, top_logprobs, arrived, sources)
    return await respond(request, state, prepared, response_format)


@dataclass
class ChatFormat:
    completion_id: str
    created: int
    model: str
    _opened: set[int] = field(default_factory=set)

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
        if delta.text or delta.logprobs:
            content = {"content": delta.text}
            logprobs = _logprobs(delta.logprobs)
            chunks.append(self._chunk([_stream_choice(delta.index, content, logprobs, None)]))
        if delta.finish_reason is not None:
            closing = _stream_choice(delta.index, {}, None, delta.finish_reason)
            chunks.append(self._chunk([closing]))
        return chunks

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        return {**self._chunk([]), "usage": usage.as_dict()}

    def body(self, choices: list[FinishedChoice], usage: Usage) -> dict[str, Any]:
        rendered = [
            {
                "index": choice.index,
                "message": {"role": "assistant", "content": choice.text},
                "logprobs": _logprobs(choice.logprobs),
                "finish_reason": choice.finish_reason,
            }
            for choice in choices
        ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": rendered,
            "usage": usage.as_dict(),
        }


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
