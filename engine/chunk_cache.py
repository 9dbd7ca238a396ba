"""Store and evict chunk KV ahead of time, through ordinary engine requests.

The chunk store lives with the model in the engine's worker. A precompute request is the fixed
prefix, the chunk and one more token, planned as a blend at ratio 1.0: the worker computes the
chunk exactly as it would alone and stores it. An eviction request carries the chunks' token ids
to the connector, which deletes them before the request runs.

A contextual precompute puts the chunks expected to stand before this one (its neighbours in the
library, chunks retrieved with it) in place of the prefix's neutral passages, cut or filled to
exactly their length: the chunk's KV is computed behind the real kind of context it will follow,
yet sits where a stored chunk always does (right after ``len(prefix)`` tokens), so entries and
their re-rotation stay as they are. A learning request computes a whole arrangement of chunks
in one pass, as they stand in a prompt after its head; each entry holds its chunk's KV moved to
that same place, so reusing them where they were learnt is what a prefill computes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from engine.contract import BlendPlan, BlendStats, ChunkSpan, Recipe, eviction_params
from engine.runtime import Engine


def context_window(neutral: Sequence[int], context: Sequence[Sequence[int]]) -> list[int]:
    """Exactly ``len(neutral)`` tokens to precompute a chunk behind: the tail of the ``context``
    chunks joined in order (most relevant last, right before the chunk); when they are shorter,
    the front is filled with the tail of ``neutral``."""
    size = len(neutral)
    joined = [token for chunk in context for token in chunk][-size:] if size else []
    return [*neutral[len(joined) :], *joined]


class ChunkCache:
    def __init__(self, engine: Engine, prefix: list[int], head_len: int | None = None) -> None:
        """``prefix`` is the fixed chunk prefix; its first ``head_len`` tokens are the prompt's
        head (chat or completion), the rest the neutral passages that a chunk's context replaces
        (None: the prefix is all head and leaves no room for context)."""
        self.engine = engine
        self.prefix = list(prefix)
        self.head_len = len(self.prefix) if head_len is None else head_len
        if not 0 <= self.head_len <= len(self.prefix):
            raise ValueError(f"head_len must be in [0, {len(self.prefix)}], got {head_len}")

    async def precompute(
        self,
        chunk: list[int],
        context: list[list[int]] | None = None,
        replace: bool = False,
        salt: str = "",
    ) -> BlendStats | None:
        """Compute and store ``chunk``'s KV; returns the worker's statistics (``chunks_missed``
        1: computed and stored; ``chunks_hit`` 1: an entry was there and is kept).

        ``context``: token ids of the chunks that should stand before this one, most relevant
        last, each as it stands in a prompt (separator included); None: behind the fixed prefix.
        ``replace``: compute the chunk even if an entry is stored and store it in that entry's
        place; requests meanwhile keep hitting the old entry. ``salt``: the chunk's project's
        (`BlendPlan.kv_salt`), which its entry's key is made with.
        """
        if not self.engine.blending:
            return None
        head, neutral = self.prefix[: self.head_len], self.prefix[self.head_len :]
        if context is None:
            behind = self.prefix
        elif neutral:
            behind = head + context_window(neutral, context)
        else:
            raise ValueError("precomputing behind context needs neutral passages in the prefix")
        span = ChunkSpan(len(behind), len(behind) + len(chunk))
        plan = BlendPlan(
            Recipe("blend", 1.0),
            (span,),
            store_behind_context=context is not None,
            replace_stored=replace,
            kv_salt=salt,
        )
        prompt = [*behind, *chunk, self.prefix[-1]]
        if context is not None:
            return await self._run("precompute", prompt, plan=plan)
        stats = await self._run("precompute", prompt, plan=plan, cache_salt=_behind_prefix(plan))
        if stats is None:  # vLLM's cache held the whole chunk: nothing was claimed to store
            stats = await self._run("precompute", prompt, plan=plan)
        return stats

    async def learn(
        self, head: list[int], chunks: list[list[int]], separator: Sequence[int], salt: str = ""
    ) -> BlendStats | None:
        """Compute ``chunks`` as they stand in a prompt: after ``head``, in this order, each
        followed by ``separator``; store each one's KV in its entry's place (replacing what is
        stored). One pass, a prefill of that prompt: every entry then holds exactly the KV that
        a prefill of any prompt starting this way gives its chunk. The statistics list every
        chunk's key in order (``chunk_keys``)."""
        if not self.engine.blending or not chunks:
            return None
        prompt, spans = list(head), []
        for chunk in chunks:
            spans.append(ChunkSpan(len(prompt), len(prompt) + len(chunk)))
            prompt += [*chunk, *separator]
        plan = BlendPlan(
            Recipe("blend", 1.0),
            tuple(spans),
            store_behind_context=True,
            replace_stored=True,
            kv_salt=salt,
        )
        return await self._run("learn", [*prompt, self.prefix[-1]], plan=plan)

    async def evict(self, chunks: list[list[int]], salt: str = "") -> None:
        """Delete the KV of ``chunks`` stored with ``salt`` from every tier."""
        if self.engine.blending and chunks:
            params = eviction_params(chunks, salt)
            await self._run("evict", [*self.prefix, self.prefix[-1]], params)

    async def _run(
        self,
        kind: str,
        prompt: list[int],
        transfer: dict[str, Any] | None = None,
        plan: BlendPlan | None = None,
        cache_salt: str | None = None,
    ) -> BlendStats | None:
        """One single-token request; its own cache salt (None: one of its own) keeps vLLM's
        prefix cache from answering for the connector."""
        from vllm import SamplingParams

        request_id = f"{kind}-{uuid.uuid4().hex}"
        extra = None if transfer is None else {"kv_transfer_params": transfer}
        params = SamplingParams(max_tokens=1, temperature=0, extra_args=extra)
        reported: list[BlendStats] = []
        outputs = self.engine.generate(
            request_id, prompt, params, plan, reported.append, cache_salt=cache_salt or request_id
        )
        async for _ in outputs:
            pass
        return reported[-1] if reported else None


def _behind_prefix(plan: BlendPlan) -> str:
    """The vLLM cache salt every precompute behind the fixed prefix shares (per project and
    recipe): the prefix's full blocks are then computed once and read back by the next ones, so
    settling a chunk computes the chunk, not the prefix again (272 tokens for Qwen2.5: its chat
    head and the neutral passages). What they share is exact: a precompute computes every
    token."""
    return f"{plan.cache_salt}/behind-prefix"
