"""What a generation yields and a response reports, shared by every layer of the gateway.

The plumbing (``http``: usage per project), the OpenAI shapes (``openai``: the bodies and events
they render) and the serving of a turn all read these records; they live here, below all of them,
so none has to import upward to name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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
class FinishedChoice:
    """One choice's whole answer, collected from its deltas."""

    index: int
    text: str = ""
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None


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
