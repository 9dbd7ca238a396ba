"""Where a request's chunks come from: sent ``documents``, or retrieval from the library."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from engine.contract import BlendPlan, BlendStats
from gateway.http.errors import APIError
from gateway.openai.filters import matches
from gateway.openai.protocol import RetrievalOptions
from gateway.openai.ranking import ranking_for
from gateway.rag.chunked_prompt import ChunkedPrompt, Chunks, document_chunks, stored_chunks
from gateway.rag.learnt_tracker import Arrangement
from gateway.state import AppState
from retriever import Tenant


async def request_chunks(
    documents: list[str] | None,
    retrieval: RetrievalOptions | None,
    query: str,
    state: AppState,
    tenant: Tenant,
) -> Chunks | None:
    """The chunks to place before the question: the sent ``documents``, else what
    ``retrieval`` finds for ``query`` among `tenant`'s documents; None for a plain request."""
    if documents is not None:
        state.passages.remember(documents, tenant.kv_salt)
        return document_chunks(documents, state.tokenizer)
    options = retrieval
    if options is None:
        return None
    if state.library is None:
        raise APIError(503, "Retrieval is unavailable: the document library did not load.")
    condition = options.filters
    try:
        hits = await asyncio.to_thread(
            state.library.search,
            query,
            options.top_k or state.settings.retrieval_top_k,
            options.threshold,
            options.document_ids,
            ranking_for(options.ranking_options, state.settings, "retrieval.ranking_options"),
            tenant=tenant,
            where=None if condition is None else partial(matches, condition),
        )
    except ValueError as exc:
        raise APIError(400, f"Retrieval needs a question: {exc}.", param="retrieval") from exc
    sources = [
        {
            "document_id": hit.document_id,
            "chunk_index": hit.chunk_index,
            "score": hit.score,
            "start_char": hit.start_char,
            "end_char": hit.end_char,
        }
        for hit in hits
    ]
    chunks = stored_chunks([hit.token_ids for hit in hits], state.tokenizer)
    context = "library" if state.neighbour_contexts else "cold"
    return replace(chunks, sources=sources, context=context)


def learnt_chunks(chunks: Chunks, prompt: ChunkedPrompt, state: AppState, tenant: Tenant) -> Chunks:
    """``chunks``, placed in ``prompt``, as learnt when they stand where their KV was learnt in
    `tenant`'s chunk-KV salt (sightings counted, with the prompt's head before them)."""
    if state.learnt_contexts is None or not prompt.chunk_spans:
        return chunks
    head = prompt.token_ids[: prompt.chunk_spans[0].start]
    return state.learnt_contexts.classify(chunks, tenant.kv_salt, head)


def learning_plan(
    chunks: Chunks, prompt: ChunkedPrompt, plan: BlendPlan, state: AppState, tenant: Tenant
) -> tuple[BlendPlan, Callable[[BlendStats | None], object] | None]:
    """With learning on, a cold request's plan stores the chunks it misses as computed in place
    (those before any reused chunk); what records the set as learnt if it missed them all.
    Otherwise what settles behind the fixed prefix the chunks the worker stored in place (the
    tool catalog keeps the KV of the context it was first seen in)."""
    learnt = state.learnt_contexts
    if learnt is None or chunks.context != "cold" or len(chunks.token_ids) < 2:
        settler = state.settler
        if settler is None:
            return plan, None
        by_span = list(chunks.token_ids)
        if prompt.tool_span is not None:
            by_span.insert(prompt.tool_span, [])
        return plan, partial(settler.after_blend, by_span, tenant.kv_salt)
    head = prompt.token_ids[: prompt.chunk_spans[0].start]
    arrangement = Arrangement.of(chunks.token_ids, chunks.separator, tenant.kv_salt, head)
    return replace(plan, store_behind_context=True), partial(learnt.record_learnt, arrangement)
