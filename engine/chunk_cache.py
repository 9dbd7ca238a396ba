"""Store and evict chunk KV ahead of time, through ordinary engine requests.

The chunk store lives with the model in the engine's worker. A precompute request is the fixed
prefix, the chunk and one more token, planned as a blend at ratio 1.0: the worker computes the
chunk exactly as it would alone and stores it. An eviction request carries the chunks' token ids
to the connector, which deletes them before the request runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from engine.contract import BlendPlan, BlendStats, ChunkSpan, eviction_params, stats_in
from engine.runtime import Engine


class ChunkCache:
    def __init__(self, engine: Engine, prefix: list[int]) -> None:
        self.engine = engine
        self.prefix = list(prefix)

    async def precompute(self, chunk: list[int]) -> BlendStats | None:
        """Compute and store ``chunk``'s KV; returns the worker's statistics."""
        if not self.engine.blending:
            return None
        span = ChunkSpan(len(self.prefix), len(self.prefix) + len(chunk))
        plan = BlendPlan("blend", 1.0, (span,))
        prompt = [*self.prefix, *chunk, self.prefix[-1]]
        return await self._run("precompute", prompt, plan.to_params())

    async def evict(self, chunks: list[list[int]]) -> None:
        """Delete the stored KV of ``chunks`` from every tier."""
        if self.engine.blending and chunks:
            await self._run("evict", [*self.prefix, self.prefix[-1]], eviction_params(chunks))

    async def _run(
        self, kind: str, prompt: list[int], transfer: dict[str, Any]
    ) -> BlendStats | None:
        from vllm import SamplingParams

        request_id = f"{kind}-{uuid.uuid4().hex}"
        params = SamplingParams(
            max_tokens=1, temperature=0, extra_args={"kv_transfer_params": transfer}
        )
        stats = None
        async for output in self.engine.generate(request_id, prompt, params, request_id):
            if output.finished:
                stats = stats_in(output.kv_transfer_params)
        return stats
