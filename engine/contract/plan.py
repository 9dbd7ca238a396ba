"""The blend plan: how one request's chunk region is filled, gateway -> scheduler -> worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.contract.recipe import Recipe
from engine.contract.types import EVICT_KEY, EVICT_SALT_KEY, PLAN_KEY


@dataclass(frozen=True)
class ChunkSpan:
    """Prompt positions [start, end) holding one chunk, tokenized on its own."""

    start: int
    end: int


@dataclass(frozen=True)
class BlendPlan:
    """How one request's chunk region is filled; travels gateway -> scheduler -> worker."""

    recipe: Recipe
    spans: tuple[ChunkSpan, ...]
    store_behind_context: bool = False
    """Store every missed chunk as computed here, behind whatever tokens stand before it, its
    keys moved to where the chunk prefix ends (where every entry's KV sits). Only contextual
    precompute and learning requests set it (``ChunkCache.precompute`` with ``context``,
    ``ChunkCache.learn``)."""
    replace_stored: bool = False
    """Compute every chunk even when an entry is stored, and store the result in its place. The
    old entry serves other requests until the new one is written (in this same worker pass), so
    a refresh never turns a concurrent request's hit into a miss. Only refreshing precompute
    requests set it (``ChunkCache.precompute`` with ``replace``)."""
    stats_id: str = ""
    """The id the front end knows the request by; the worker reports the request's statistics
    to it under this id (``Engine.generate`` sets it). Empty: they are not reported."""
    kv_salt: str = ""
    """Mixed into every chunk's store key and into vLLM's prefix-cache salt: the project's, so
    no project hits (or times) another's cached KV. Empty for projects that share chunk KV."""

    def __post_init__(self) -> None:
        previous_end = 0
        for span in self.spans:
            if not previous_end <= span.start < span.end:
                raise ValueError("chunk spans must be non-empty, ordered and not overlap")
            previous_end = span.end

    @property
    def cache_salt(self) -> str | None:
        """Blended KV is approximate: vLLM's prefix cache shares it only with the same recipe,
        and of the same project (`kv_salt`)."""
        parts = [self.kv_salt] if self.kv_salt else []
        if self.recipe.mode != "full":
            parts.append(self.recipe.salt())
        return "/".join(parts) or None

    @property
    def capturable(self) -> bool:
        """Whether a first sighting of every chunk may be prefilled by vLLM and its chunks copied
        out of the paged cache: not for a plan that stores chunks behind chosen context or
        replaces stored entries (those compute chunks otherwise than the prompt would)."""
        chosen = self.store_behind_context or self.replace_stored
        return bool(self.spans) and self.recipe.mode != "full" and not chosen

    def claim_end(self, num_prompt_tokens: int) -> int:
        """Prompt tokens the connector computes; vLLM computes the rest, at least the last one.

        Usually the chunk region; selection by the question's attention ("attn", "qv", "probe")
        needs the question blended too, so it claims all but the last prompt token.
        """
        if not self.spans or self.recipe.mode == "full":
            return 0
        end = num_prompt_tokens if self.recipe.asks_question else self.spans[-1].end
        return min(end, num_prompt_tokens - 1)

    def claims(self, num_prompt_tokens: int, num_cached: int) -> bool:
        """Whether the connector should fill the request past vLLM's prefix hit of
        ``num_cached`` tokens. A blend that selects by the question's attention reads the
        whole chunk region from the prompt's start, cached or not, and recomputes its ratio
        of it; when the prefix cache lacks no more tokens than that (a session's next turn
        after a long tool catalog or documents), vLLM computes them exactly, for less. A
        recipe that recomputes everything is always claimed (the blend path checked whole)."""
        claim_end = self.claim_end(num_prompt_tokens)
        if claim_end <= num_cached:
            return False
        ratio, lacking = self.recipe.ratio, claim_end - num_cached
        return not self.recipe.asks_question or ratio >= 1 or lacking > ratio * claim_end

    def to_params(self) -> dict[str, Any]:
        """``kv_transfer_params`` for the engine; empty for a full prefill."""
        if self.recipe.mode == "full":
            return {}
        body: dict[str, Any] = {
            "recipe": self.recipe.to_params(),
            "spans": [[span.start, span.end] for span in self.spans],
        }
        if self.store_behind_context:
            body["store_behind_context"] = True
        if self.replace_stored:
            body["replace_stored"] = True
        if self.stats_id:
            body["stats_id"] = self.stats_id
        if self.kv_salt:
            body["kv_salt"] = self.kv_salt
        return {PLAN_KEY: body}

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> BlendPlan | None:
        """Decode what ``to_params`` encoded; raises ``ValueError`` on anything malformed."""
        body = (params or {}).get(PLAN_KEY)
        if body is None:
            return None
        try:
            return cls(
                Recipe.from_params(body["recipe"]),
                tuple(ChunkSpan(int(start), int(end)) for start, end in body["spans"]),
                bool(body.get("store_behind_context", False)),
                bool(body.get("replace_stored", False)),
                str(body.get("stats_id", "")),
                str(body.get("kv_salt", "")),
            )
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed blend plan: {exc!r}") from exc


Eviction = tuple[str, list[int]]
"""A chunk whose stored KV is to go: the salt it was stored with (`BlendPlan.kv_salt`), its ids."""


def eviction_params(chunks: list[list[int]], salt: str = "") -> dict[str, Any]:
    """``kv_transfer_params`` asking the worker to delete these chunks' KV stored with `salt`."""
    return {EVICT_KEY: [list(chunk) for chunk in chunks], EVICT_SALT_KEY: salt}


def evictions_in(params: dict[str, Any] | None) -> list[Eviction]:
    salt = str((params or {}).get(EVICT_SALT_KEY, ""))
    return [(salt, [int(token) for token in chunk]) for chunk in (params or {}).get(EVICT_KEY, [])]
