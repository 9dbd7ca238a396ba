"""Run one API request's prompts through the engine as a single stream of per-choice deltas."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vllm import SamplingParams
from vllm.utils.async_utils import merge_async_iterators

from engine.contract import BlendStats
from engine.runtime import Engine
from gateway.outputs import ChoiceDelta, TokenLogprob, Usage
from gateway.rag.blending import blend_summary
from gateway.rag.planned_turn import PlannedTurn


@dataclass
class Generation:
    """A planned turn's prompts through the engine; iterate ``deltas()`` once. Prompts without
    a plan run under the tenant's prefix-cache salt (a plan carries its own)."""

    engine: Engine
    turn: PlannedTurn
    params: SamplingParams
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None

    def __post_init__(self) -> None:
        self.usage = Usage(prompt_tokens=sum(len(ids) for ids in self.turn.prompts))
        self._stats: dict[int, BlendStats] = {}
        """The worker's statistics of each prompt (by position) that it blended."""

    @property
    def blend_stats(self) -> BlendStats | None:
        """The statistics of the last prompt blended (a request with chunks has one prompt)."""
        return next(reversed(self._stats.values()), None)

    def blend_summary(self) -> dict[str, Any] | None:
        turn, usage = self.turn, self.usage
        if turn.plan is None:
            return None
        stats, prompt_tokens, cached = self.blend_stats, usage.prompt_tokens, usage.cached_tokens
        return blend_summary(turn.plan, stats, prompt_tokens, cached, turn.context, turn.tool_span)

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    async def deltas(self) -> AsyncIterator[ChoiceDelta]:
        """Choice index = prompt position * n + completion index, as OpenAI numbers them."""
        plan = self.turn.plan
        streams = [
            self.engine.generate(
                f"{self.request_id}-{position}",
                ids,
                self.params,
                plan,
                on_stats=partial(self._stats.__setitem__, position),
                cache_salt=(self.turn.kv_salt or None) if plan is None else None,
            )
            for position, ids in enumerate(self.turn.prompts)
        ]
        async with aclosing(merge_async_iterators(*streams)) as merged:
            async for position, output in merged:
                self._record_cache_use(position, output)
                for completion in output.outputs:
                    if completion.token_ids and self.first_token_at is None:
                        self.first_token_at = time.perf_counter()
                    self.usage.completion_tokens += len(completion.token_ids)
                    yield ChoiceDelta(
                        index=position * self.params.n + completion.index,
                        text=completion.text,
                        num_tokens=len(completion.token_ids),
                        logprobs=_token_logprobs(completion, self.params.logprobs),
                        finish_reason=completion.finish_reason,
                        token_ids=completion.token_ids,
                    )

    def _record_cache_use(self, position: int, output: Any) -> None:
        """A finished prompt's cached tokens: the worker's count when it blended the prompt
        (its statistics arrive before the last output), else vLLM's prefix-cache hits."""
        if not output.finished:
            return
        stats = self._stats.get(position)
        if stats is not None:
            self.usage.cached_tokens += stats.cached_tokens
        else:
            self.usage.cached_tokens += output.num_cached_tokens or 0


def _token_logprobs(completion: Any, top_k: int | None) -> list[TokenLogprob] | None:
    if top_k is None or completion.logprobs is None:
        return None
    entries = []
    for token_id, candidates in zip(completion.token_ids, completion.logprobs, strict=True):
        chosen = candidates[token_id]
        ranked = sorted(candidates.values(), key=lambda candidate: candidate.rank)[:top_k]
        entries.append(
            TokenLogprob(
                token=chosen.decoded_token or "",
                logprob=chosen.logprob,
                top=[(candidate.decoded_token or "", candidate.logprob) for candidate in ranked],
            )
        )
    return entries
