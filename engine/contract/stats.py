"""What the worker reports straight to the front end: each blended request's statistics, and
the chunk store's evictions that happen between requests."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from engine.contract.types import Mode


@dataclass(frozen=True)
class BlendStats:
    """What the worker reports for one blended request (and the response's ``blend`` object)."""

    mode: Mode
    reused_tokens: int
    recomputed_tokens: int
    chunks_hit: int
    chunks_missed: int
    prefix_cached_tokens: int
    fell_back: bool = False
    """The blend failed and the chunk region was computed exactly instead (a full prefill)."""
    rejected_chunks: int = 0
    """Stored entries that failed verification against their chunk (treated as misses)."""
    chunk_keys: tuple[str, ...] = ()
    """Chunk-store keys of the chunks now held (hits and stored misses), in prompt order."""
    evicted_keys: tuple[str, ...] = ()
    """Chunk-store keys that left the store through eviction since the worker last reported."""
    stored_in_context: tuple[int, ...] = ()
    """Positions (in ``chunk_keys``) of missed chunks stored as this request computed them,
    behind its own context rather than the fixed chunk prefix (a first sighting's): the front
    end recomputes them behind the prefix once the engine is idle (`gateway/rag/settle.py`)."""
    hit_positions: tuple[int, ...] = ()
    """Positions (in ``chunk_keys``) of the chunks reused from the store."""
    store: dict[str, int] = field(default_factory=dict)
    """The chunk store's counters and sizes when the request ran (``ChunkKVStore.stats()``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What a client sees in a response's ``blend`` object: everything but the keys."""
        body = asdict(self)
        for name in ("chunk_keys", "evicted_keys", "store", "stored_in_context", "hit_positions"):
            del body[name]
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> BlendStats:
        names = {field.name for field in fields(cls)}
        kept = {key: value for key, value in body.items() if key in names}
        for name in ("chunk_keys", "evicted_keys", "stored_in_context", "hit_positions"):
            kept[name] = tuple(kept.get(name, ()))
        return cls(**kept)

    @classmethod
    def without_blend(cls, mode: Mode, prompt_tokens: int, cached_tokens: int) -> BlendStats:
        """No chunk was blended: vLLM's prefix cache served the region, or it was a full prefill."""
        return cls(mode, 0, prompt_tokens - cached_tokens, 0, 0, cached_tokens)

    @property
    def cached_tokens(self) -> int:
        return self.reused_tokens + self.prefix_cached_tokens


@dataclass(frozen=True)
class StoreEvictions:
    """Chunk-store keys that left the worker's store through eviction outside any request (a
    backing tier's writer made room for a newer entry), with the store's counters after it."""

    evicted_keys: tuple[str, ...]
    store: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> StoreEvictions:
        return cls(tuple(body["evicted_keys"]), dict(body.get("store", {})))
