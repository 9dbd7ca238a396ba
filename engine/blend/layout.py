"""The prompt a blend computes, and which of its positions are cached, worked out on the host.

Everything here follows from Python ints the caller already has (the prompt's length, where the
chunks lie, how many positions are settled), so it is computed on the host once per prompt and
sent to the model's device without the host waiting: no count in the blend's layer loop has to
be read back from a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from engine.blend.stream import upload


@dataclass(frozen=True)
class Prompt:
    """The tokens of one blended prefill, at positions 0..n-1."""

    token_ids: Tensor
    """[n] on the model's device."""
    question_start: int | None = None
    """Where the question begins: the tokens whose attention the "attn", "qv" and "probe"
    metrics measure (default: where the last cached chunk ends). Nothing after it is cached."""
    settled: int = 0
    """Leading positions that already hold their final K/V where the blend's ``attend`` reads
    (vLLM's prefix cache): they are neither computed nor selected."""

    @property
    def num_tokens(self) -> int:
        return self.token_ids.shape[0]


@dataclass(frozen=True)
class Layout:
    """Which positions of a prompt keep their cache and which are computed whatever happens."""

    positions: Tensor
    """settled..n-1, the positions a blend may compute, on the device."""
    cached: Tensor
    """[n] bool on the device: the positions whose cached K/V may be kept (chunk heads and
    uncached positions are not; when every position from ``settled`` on would be, the last is
    not, so no layer computes nothing)."""
    forced: Tensor
    """The positions from ``settled`` on that are not ``cached``, ascending, on the device."""
    num_cached: int
    """How many positions from ``settled`` on are ``cached``."""
    chunk_tokens: int
    """Chunk positions from ``settled`` on, heads included: what the recipe's ratio shares."""
    head_tokens: int
    """Those of them computed whatever happens (the chunk heads)."""
    question_rows: int
    """Positions from the question on (and from ``settled`` on): always computed, the last
    rows of any set of computed positions."""

    @property
    def num_forced(self) -> int:
        return self.forced.shape[0]

    @classmethod
    def of(
        cls, prompt: Prompt, spans: tuple[tuple[int, int], ...], chunk_head_tokens: int
    ) -> Layout:
        """The layout of ``prompt`` with cached chunks at ``spans`` whose first
        ``chunk_head_tokens`` are always computed. Raises ``ValueError`` if the question
        starts before a cached chunk ends."""
        num_tokens, settled = prompt.num_tokens, prompt.settled
        question_start = max((end for _, end in spans), default=0)
        if prompt.question_start is not None:
            if prompt.question_start < question_start:
                raise ValueError(
                    f"the question starts at {prompt.question_start}, inside the cached chunks "
                    f"(which end at {question_start})"
                )
            question_start = prompt.question_start
        cached = torch.zeros(num_tokens, dtype=torch.bool)  # on the host: no reads back
        in_chunks = torch.zeros_like(cached)
        for start, end in spans:
            in_chunks[start:end] = True
            cached[start + chunk_head_tokens : end] = True
        in_chunks[:settled] = False
        if cached[settled:].all():
            cached[-1] = False  # one exact token keeps every layer's computed set non-empty
        positions = torch.arange(settled, num_tokens)
        forced = positions[~cached[settled:]]
        device = prompt.token_ids.device
        return cls(
            positions=upload(positions, device),
            cached=upload(cached, device),
            forced=upload(forced, device),
            num_cached=int(cached[settled:].sum()),
            chunk_tokens=int(in_chunks.sum()),
            head_tokens=int((in_chunks & ~cached).sum()),
            question_rows=max(0, num_tokens - max(question_start, settled)),
        )
