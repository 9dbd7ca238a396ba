"""The async half of ``blend.segment``: the passages the server knows found in a prompt's text.

``gateway.rag.pasted_prompt`` splits a text around found passages; this reads which passages the
tenant may reuse (sent before, or its library's chunks) and finds them, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.http import metrics
from gateway.openai.protocol import ChatMessage
from gateway.openai.tool_prompt import render_chat
from gateway.rag.passage_index import KnownPassages
from gateway.rag.pasted_prompt import PastedPrompt, split_prompt
from gateway.rag.tool_block import find_block, tool_block
from gateway.state import AppState
from retriever import Library, LibraryUnavailable, Tenant

log = logging.getLogger(__name__)


async def pasted_chat(
    messages: list[ChatMessage],
    tools: list[dict[str, Any]] | None,
    state: AppState,
    tenant: Tenant,
) -> PastedPrompt:
    """The chat template's text with `tenant`'s known passages as chunks, and its tool catalog
    as one."""
    text = render_chat(messages, state.tokenizer, tools)
    block = find_block(text, tool_block(state.tokenizer, tools))
    return await _pasted(text, [], state, tenant, block)


async def pasted_completion(prompt: str, state: AppState, tenant: Tenant) -> PastedPrompt:
    """The prompt after the tokenizer's own leading special tokens (BOS), `tenant`'s known
    passages as chunks."""
    return await _pasted(prompt, state.tokenizer.encode(""), state, tenant)


async def _pasted(
    text: str,
    head: list[int],
    state: AppState,
    tenant: Tenant,
    block: tuple[int, int] | None = None,
) -> PastedPrompt:
    known = state.passages
    library_chunks: set[int] | None = set()
    if state.library is not None:
        library_chunks = await asyncio.to_thread(
            _project_chunks, known, state.library, tenant.project
        )
    found = await asyncio.to_thread(known.find, text, tenant.kv_salt, library_chunks)
    prompt, placed = split_prompt(text, found, state.tokenizer, head, block)
    for passage in placed:
        metrics.PASTED_PASSAGES.labels(passage.origin).inc()
    return PastedPrompt(prompt, placed)


def _project_chunks(known: KnownPassages, library: Library, project: str) -> set[int] | None:
    """Files the library's new chunks; `project`'s chunk ids (None while the library holds
    only its documents, none while the library's database is unreachable)."""
    known.sync_library(library)
    try:
        if library.store.holds_only(project):
            return None
        return library.store.chunk_ids(project=project)
    except LibraryUnavailable as exc:
        log.warning("pasted passages: library chunks not searched this time (%s)", exc)
        return set()
