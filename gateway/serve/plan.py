"""One planned turn per request: every route's prompt, chunks and blend plan come from here.

Chat, completions and responses translate their OpenAI shapes into a `PromptShape` and a
`TurnAsk` and call `plan_turn`; what comes back (`PlannedTurn`) is what serving runs, unchanged.
The chunks come from one of three places, in this order: passages found pasted in the prompt
(``blend.segment``), chunks a search tool already found (``file_search``), or the request's own
``documents`` / ``retrieval``. With none, the prompt is plain (a chat's tool catalog still a
chunk when the engine blends).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.contract import BlendPlan
from gateway.openai.protocol import BlendOptions, RetrievalOptions
from gateway.rag.blending import blend_plan
from gateway.rag.chunked_prompt import ChunkedPrompt, Chunks
from gateway.rag.planned_turn import PlannedTurn
from gateway.serve.chunk_sources import learning_plan, learnt_chunks, request_chunks
from gateway.serve.shapes import PromptShape
from gateway.state import AppState
from retriever import Tenant


@dataclass(frozen=True)
class TurnAsk:
    """What a request asks of its prompt besides its text."""

    blend: BlendOptions | None = None
    documents: list[str] | None = None
    retrieval: RetrievalOptions | None = None
    segment: bool = False
    """Find the known passages pasted in the prompt (``segmenting`` decided it)."""
    found: Chunks | None = None
    """Chunks a search tool found for this turn, best first."""
    room: int = 0
    """With ``found``: tokens kept free to answer in; the worst chunks are left out to fit."""
    default_retrieval: bool = True
    """Whether the server's ``RAGBLEND_RETRIEVAL_BY_DEFAULT`` applies (not where a search tool
    is how a request retrieves)."""

    def retrieval_in(self, state: AppState) -> RetrievalOptions | None:
        """The retrieval asked for, or the server's default one."""
        by_default = self.default_retrieval and state.settings.retrieval_by_default
        if self.retrieval is None and by_default and state.library is not None:
            return RetrievalOptions()
        return self.retrieval


async def plan_turn(
    shape: PromptShape, ask: TurnAsk, state: AppState, tenant: Tenant
) -> PlannedTurn:
    """The request's prompts and plan, salted with `tenant`'s KV salt; retrieval and pasted
    passages read only `tenant`'s documents. Raises `APIError` (4xx) for a prompt the chunks
    cannot be placed in."""
    if ask.segment:
        return await _pasted_turn(shape, ask, state, tenant)
    chunks = ask.found
    if chunks is None and shape.takes_chunks:
        retrieval = ask.retrieval_in(state)
        chunks = await request_chunks(ask.documents, retrieval, shape.question, state, tenant)
    if chunks is None:
        return _plain_turn(shape, ask, state, tenant)
    return _chunked_turn(shape, chunks, ask, state, tenant)


def _chunked_turn(
    shape: PromptShape, chunks: Chunks, ask: TurnAsk, state: AppState, tenant: Tenant
) -> PlannedTurn:
    engine = state.ready_engine()
    prompt = shape.with_chunks(chunks)
    if ask.found is not None:
        prompt, chunks = _fitting(shape, prompt, chunks, engine.max_model_len - ask.room)
    chunks = learnt_chunks(chunks, prompt, state, tenant)
    plan = blend_plan(prompt, ask.blend, state.settings, engine.blending, chunks.context)
    plan, after_blend = learning_plan(chunks, prompt, plan, state, tenant)
    return PlannedTurn(
        tenant,
        [prompt.token_ids],
        _salted(plan, tenant),
        chunks.context,
        prompt.tool_span,
        chunks.sources,
        placed=len(chunks.token_ids),
        after_blend=after_blend,
    )


def _fitting(
    shape: PromptShape, prompt: ChunkedPrompt, chunks: Chunks, limit: int
) -> tuple[ChunkedPrompt, Chunks]:
    """The prompt with as many of the best chunks as keep it within ``limit`` tokens (one at
    least: a prompt still too long is refused when its budget is set)."""
    while len(prompt.token_ids) > limit and len(chunks.token_ids) > 1:
        chunks = replace(chunks, token_ids=chunks.token_ids[:-1])
        prompt = shape.with_chunks(chunks)
    return prompt, chunks


async def _pasted_turn(
    shape: PromptShape, ask: TurnAsk, state: AppState, tenant: Tenant
) -> PlannedTurn:
    engine = state.ready_engine()
    pasted = await shape.pasted(state, tenant)
    neighbours = state.neighbour_contexts
    plan = pasted.plan(ask.blend, state.settings, engine.blending, neighbours)
    return PlannedTurn(
        tenant,
        [pasted.prompt.token_ids],
        _salted(plan, tenant),
        pasted.context(neighbours),
        pasted.prompt.tool_span,
        pasted_passages=len(pasted.passages),
    )


def _plain_turn(shape: PromptShape, ask: TurnAsk, state: AppState, tenant: Tenant) -> PlannedTurn:
    """The prompts as they are; a lone prompt whose tool catalog is a span is blended with the
    catalog's recipe when the engine blends."""
    engine = state.ready_engine()
    prompts = shape.plain()
    if len(prompts) == 1 and prompts[0].spans and engine.blending:
        (prompt,) = prompts
        plan = blend_plan(prompt, ask.blend, state.settings, True, "tools")
        return PlannedTurn(
            tenant, [prompt.token_ids], _salted(plan, tenant), "tools", prompt.tool_span
        )
    return PlannedTurn(tenant, [prompt.token_ids for prompt in prompts])


def _salted(plan: BlendPlan, tenant: Tenant) -> BlendPlan:
    return replace(plan, kv_salt=tenant.kv_salt)
