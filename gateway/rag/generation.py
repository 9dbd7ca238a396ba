"""Run one API request's prompts through the engine as a single stream of per-choice deltas."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vllm import SamplingParams
from vllm.utils.async_utils import merge_async_iterators

from engine.contract import BlendPlan, BlendStats
from engine.runtime import Engine
from gateway.rag.blending import blend_summary
from gateway.rag.chunked_prompt import ChunkContext


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: list[tuple[str, float]]


@dataclass(frozen=True)
class ChoiceDelta:
    index: int
    text: str
    num_tokens: int
    logprobs: list[TokenLogprob] | None
    finish_reason: str | None
    token_ids: Sequence[int] = ()
    """The delta's tokens, which some tool parsers read besides the text."""


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens taken from caches: blended chunk KV and vLLM's prefix cache."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }


@dataclass
class Generation:
    """The prompts of one request; iterate ``deltas()`` once."""

    engine: Engine
    prompts: Sequence[list[int]]
    params: SamplingParams
    plan: BlendPlan | None = None
    kv_salt: str = ""
    """The project's salt of vLLM's prefix cache for prompts without a plan (a plan carries
    its own, `BlendPlan.kv_salt`); empty: shared."""
    context: ChunkContext = "cold"
    """What the plan's chunks' KV was computed in (reported in the blend summary)."""
    tool_span: int | None = None
    """Which of the plan's spans is the chat template's tool catalog."""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None

    def __post_init__(self) -> None:
        self.usage = Usage(prompt_tokens=sum(len(ids) for ids in self.prompts))
        self._stats: dict[int, BlendStats] = {}
        """The worker's statistics of each prompt (by position) that it blended."""

    @property
    def blend_stats(self) -> BlendStats | None:
        """The statistics of the last prompt blended (a request with chunks has one prompt)."""
        return next(reversed(self._stats.values()), None)

    def blend_summary(self) -> dict[str, Any] | None:
        if self.plan is None:
            return None
        usage = self.usage
        stats, prompt_tokens, cached = self.blend_stats, usage.prompt_tokens, usage.cached_tokens
        return blend_summary(self.plan, stats, prompt_tokens, cached, self.context, self.tool_span)

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    async def deltas(self) -> AsyncIterator[ChoiceDelta]:
        """Choice index = prompt position * n + completion index, as OpenAI numbers them."""
        streams = [
            self.engine.generate(
                f"{self.request_id}-{position}",
                ids,
                self.params,
                self.plan,
                on_stats=partial(self._stats.__setitem__, position),
                cache_salt=(self.kv_salt or None) if self.plan is None else None,
            )
            for position, ids in enumerate(self.prompts)
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
