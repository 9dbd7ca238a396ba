"""``POST /v1/completions``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from gateway.http.admission import check_choice_count
from gateway.http.errors import APIError
from gateway.http.serving import FinishedChoice, PreparedRequest, respond, response_id
from gateway.openai.protocol import CompletionRequest, PromptInput
from gateway.rag.blending import blend_plan
from gateway.rag.chunked_prompt import completion_with_chunks
from gateway.rag.generation import ChoiceDelta, TokenLogprob, Usage
from gateway.rag.pasted_prompt import pasted_completion, segmenting
from gateway.rag.prompts import completion_prompts
from gateway.rag.retrieval import learning_plan, learnt_chunks, request_chunks
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
    engine = state.engine
    assert engine is not None
    plan, sources, pasted_passages, context = None, None, None, "cold"
    after_blend = None
    chunks = None if text is None or segment else await request_chunks(body, text, state, tenant)
    if text is not None and chunks is not None:
        chunked = completion_with_chunks(text, chunks, state.tokenizer)
        chunks = learnt_chunks(chunks, chunked, state, tenant)
        plan = blend_plan(chunked, body.blend, state.settings, engine.blending, chunks.context)
        plan, after_blend = learning_plan(chunks, chunked, plan, state, tenant)
        prompts, sources, context = [chunked.token_ids], chunks.sources, chunks.context
    elif text is not None and segment:
        pasted = await pasted_completion(text, state, tenant)
        plan = pasted.plan(body.blend, state.settings, engine.blending, state.neighbour_contexts)
        prompts, pasted_passages = [pasted.prompt.token_ids], len(pasted.passages)
        context = pasted.context(state.neighbour_contexts)
    else:
        prompts = completion_prompts(body.prompt, state.tokenizer, engine.vocab_size)
    completion_id, created = response_id("cmpl")
    response_format = CompletionFormat(completion_id, created, body.model)
    prepared = PreparedRequest(
        body,
        prompts,
        plan,
        body.logprobs,
        arrived,
        sources,
        pasted_passages=pasted_passages,
        context=context,
        after_blend=after_blend,
    )
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
