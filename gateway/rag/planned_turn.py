"""One request's prompt as the engine will see it: the record a route hands to serving.

Built once per request by ``gateway.serve.plan.plan_turn`` (every route calls it) and read by the
generation, the metrics and the response's extras. Nothing downstream patches it: the plan is
already resolved and salted with the tenant's chunk-KV salt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.contract import BlendPlan, BlendStats
from gateway.rag.chunked_prompt import ChunkContext
from retriever import Tenant


@dataclass(frozen=True)
class PlannedTurn:
    tenant: Tenant
    """Whose request this is: the project its objects and usage belong to, and its KV salt."""
    prompts: list[list[int]]
    """Token ids of each prompt (several only for a completion sent as a list of prompts)."""
    plan: BlendPlan | None = None
    """The blend plan of a prompt with chunks (its one prompt), salted; None: a plain prefill
    under the tenant's prefix-cache salt."""
    context: ChunkContext = "cold"
    """What the plan's chunks' KV was computed in."""
    tool_span: int | None = None
    """Which of the plan's spans is the chat template's tool catalog."""
    sources: list[dict[str, Any]] | None = None
    """Retrieved chunks the prompt was built from, reported back to the client as citations:
    document id, chunk index, score and the span `[start_char, end_char)` in the document."""
    placed: int | None = None
    """How many of the request's chunks (best first) the prompt holds; None without chunks."""
    pasted_passages: int | None = None
    """With ``blend.segment``: how many known passages the prompt's chunks are."""
    after_blend: Callable[[BlendStats | None], object] | None = None
    """Called with the worker's blend statistics when the request ends (learning on the spot,
    settling behind the fixed prefix)."""

    @property
    def kv_salt(self) -> str:
        return self.tenant.kv_salt
