"""``POST /v1/completions``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from gateway.http.admission import check_choice_count
from gateway.http.errors import APIError
from gateway.openai.protocol import CompletionRequest, PromptInput
from gateway.outputs import ChoiceDelta, FinishedChoice, TokenLogprob, Usage
from gateway.rag.pasted_prompt import segmenting
from gateway.serve.plan import TurnAsk, plan_turn
from gateway.serve.respond import PreparedRequest, respond, response_id
from gateway.serve.shapes import CompletionShape
from gateway.state import CurrentState, RequestTenant, authorized, check_model, ready_state

router = APIRouter(dependencies=[Depends(authorized)])


@router.post("/v1/completions", response_model=None)
async def create_completion(
    body: CompletionRequest, request: Request, state: CurrentState, tenant: RequestTenant
) -> Response:
    """The request's own checks come first: a bad request is a 400 even while the model loads."""
    arrived = time.perf_counter()
    check_model(body.model, state)
    limit = state.settings.max_choices_per_request
    check_choice_count(_prompt_count(body.prompt), body.n, limit)
    text = _prompt_text(body)
    segment = segmenting(body, state.settings, one_text=text is not None)
    ready_state(request)  # 503 while the model loads or once the engine stopped
    engine = state.ready_engine()
    shape = CompletionShape(body.prompt, text, state.tokenizer, engine.vocab_size)
    ask = TurnAsk(body.blend, body.document_texts, body.retrieval, segment)
    turn = await plan_turn(shape, ask, state, tenant)
    completion_id, created = response_id("cmpl")
    response_format = CompletionFormat(completion_id, created, body.model)
    prepared = PreparedRequest(body, turn, body.logprobs, arrived)
    return await respond(request, state, prepared, response_format)


def _prompt_text(body: CompletionRequest) -> str | None:
    """The prompt as one string, or None for other shapes (which take no chunks)."""
    prompt = body.prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    if isinstance(prompt, str):
        return prompt
    if body.documents is not None or body.retrieval is not None:
        message = "documents and retrieval need the prompt as one string."
        raise APIError(400, message, param="prompt")
    return None


def _prompt_count(prompt: PromptInput) -> int:
    """A string or one list of token ids is one prompt; other lists hold one prompt per item."""
    if isinstance(prompt, str) or all(isinstance(item, int) for item in prompt):
        return 1
    return len(prompt)


@dataclass
class CompletionFormat:
    completion_id: str
    created: int
    model: str

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def chunks(self, delta: ChoiceDelta) -> list[dict[str, Any]]:
        choice = {
            "index": delta.index,
            "text": delta.text,
            "logprobs": _logprobs(delta.logprobs),
            "finish_reason": delta.finish_reason,
        }
        return [self._envelope([choice])]

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        return {**self._envelope([]), "usage": usage.as_dict()}

    def body(self, choices: list[FinishedChoice], usage: Usage) -> dict[str, Any]:
        rendered = [
            {
                "index": choice.index,
                "text": choice.text,
                "logprobs": _logprobs(choice.logprobs),
                "finish_reason": choice.finish_reason,
            }
            for choice in choices
        ]
        return {**self._envelope(rendered), "usage": usage.as_dict()}


def _logprobs(entries: list[TokenLogprob] | None) -> dict[str, Any] | None:
    if entries is None:
        return None
    offsets, offset = [], 0
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {
        "tokens": [entry.token for entry in entries],
        "token_logprobs": [entry.logprob for entry in entries],
        "top_logprobs": [dict(entry.top) for entry in entries],
        "text_offset": offsets,
    }
