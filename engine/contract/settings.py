"""The connector's set-up as it receives it in vLLM's extra config: the chunk store and channel."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

MIN_SECRET_BYTES = 16
MAX_SECRET_BYTES = 64  # blake2b's largest key
"""Bounds of the secret that signs chunk KV (a blake2b key)."""


def shared_secret(text: str) -> bytes:
    """A secret given as hex (``RAGBLEND_CHUNK_CACHE_SECRET``), shared by servers that share a
    Redis tier. Raises ValueError unless it is 32 to 128 hex characters."""
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError("the chunk-KV secret must be hex characters") from None
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"a chunk-KV secret has {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes, "
            f"got {len(secret)}"
        )
    return secret


@dataclass(frozen=True)
class BlendSettings:
    """The chunk store and set-up of the server's connector, handed to it in vLLM's extra
    config. How a request is blended is its plan's recipe, never a server setting here."""

    model_name: str
    chunk_kv_dir: str
    """Holds the chunk store's disk tier (``store/``) and the secret keying its checksums."""
    memory_bytes: int
    disk_bytes: int | None
    """Disk tier budget; None: no limit."""
    chunk_prefix: tuple[int, ...]
    """Token ids each chunk is precomputed behind; they are not stored."""
    stats_channel: str = ""
    """Name of the worker -> front end statistics channel; the runtime sets a fresh one for
    every engine it starts, so no other process can reach or remove it."""
    redis_url: str = ""
    """The shared Redis tier of the chunk store behind memory and disk; empty: none."""
    redis_timeout_s: float = 0.5
    recompute_when_faster: bool = True
    """Compute a hit instead of loading it from a slow tier when measured to be quicker."""
    slow_tier_format: str = "lossless"
    """How disk and Redis store chunk KV: ``lossless`` (exact, 0.68x of bf16), ``raw`` (exact)
    or ``int8`` (half of bf16)."""
    shared_secret_hex: str = field(default="", repr=False)
    """Secret signing chunk KV, shared by the servers sharing a Redis; empty: ``secret_path``."""

    @property
    def store_dir(self) -> str:
        return f"{self.chunk_kv_dir}/store"

    def rank_store_dir(self, rank: int, world_size: int) -> str:
        """The disk tier of one tensor-parallel rank: its entries hold only its KV heads."""
        if world_size == 1:
            return self.store_dir
        return f"{self.store_dir}/tp{world_size}-rank{rank}"

    @property
    def secret_path(self) -> str:
        return f"{self.chunk_kv_dir}/secret"

    def to_extra_config(self) -> dict[str, Any]:
        return {**asdict(self), "chunk_prefix": list(self.chunk_prefix)}

    @classmethod
    def from_extra_config(cls, extra: dict[str, Any]) -> BlendSettings:
        names = {field.name for field in fields(cls)}
        body = {key: value for key, value in extra.items() if key in names}
        body["chunk_prefix"] = tuple(int(token) for token in body["chunk_prefix"])
        return cls(**body)
