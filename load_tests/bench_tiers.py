"""The chunk-store tiers `bench_blend` compares, and what their stored entries weigh.

Each phase of the TTFT benchmark serves chunk KV from one tier: the memory tier, or a memory
tier too small to hold a chunk in front of the disk tier or of a Redis tier (then with a disk tier
too small to hold one either), each slow tier in the raw, lossless or int8 format. After the chunks
are stored, the slow tier's entries are read back and their headers verified, which gives the
bytes per token each format really costs on the model, headers and scales included.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.kvstore.codec import EntryReader
from engine.kvstore.disk import ENTRY_SUFFIX
from engine.kvstore.mac import EntryMac
from engine.kvstore.redis_tier import KEY_PREFIX

ALL_MODES = (
    "full",
    "prefix",
    "reuse",
    "blend@0.05",
    "blend@0.1",
    "blend@0.15",
    "blend@0.2",
    "blend@0.3",
)
SLOW_TIER_MODES = ("full", "reuse", "blend@0.15")
TOO_SMALL_FOR_A_CHUNK = 1 << 20
"""Bytes of a tier that must hold no chunk (one 512-token chunk of the 0.5B model is 6 MiB)."""


@dataclass(frozen=True)
class TierPhase:
    """One engine's chunk-store configuration, and the modes timed on it."""

    modes: tuple[str, ...]
    serves_from: str
    """The tier every chunk hit comes from: ``memory``, ``disk`` or ``redis``."""
    slow_format: str = "raw"

    @property
    def memory_bytes(self) -> int:
        return 4 << 30 if self.serves_from == "memory" else TOO_SMALL_FOR_A_CHUNK

    @property
    def needs_redis(self) -> bool:
        return self.serves_from == "redis"

    def blend_overrides(self, redis_url: str) -> dict[str, Any]:
        """`BlendSettings` fields for `start_engine`, besides the memory tier's size."""
        return {
            "disk_bytes": TOO_SMALL_FOR_A_CHUNK if self.needs_redis else None,
            "redis_url": redis_url if self.needs_redis else "",
            "slow_tier_format": self.slow_format,
        }


PHASES: dict[str, TierPhase] = {
    "memory": TierPhase(ALL_MODES, "memory"),
    "disk": TierPhase(SLOW_TIER_MODES, "disk"),
    "redis": TierPhase(SLOW_TIER_MODES, "redis"),
    "disk-lossless": TierPhase(SLOW_TIER_MODES, "disk", "lossless"),
    "redis-lossless": TierPhase(SLOW_TIER_MODES, "redis", "lossless"),
    "disk-int8": TierPhase(SLOW_TIER_MODES, "disk", "int8"),
    "redis-int8": TierPhase(SLOW_TIER_MODES, "redis", "int8"),
}


@dataclass(frozen=True)
class StoredEntries:
    """Entries of one tier, read back and verified."""

    tier: str
    formats: tuple[str, ...]
    entries: int
    tokens: int
    bytes: int

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bytes_per_token": round(self.bytes_per_token, 1)}


def _measure(
    tier: str, entries: Iterable[tuple[str, BinaryIO, int]], secret: bytes
) -> StoredEntries:
    """Sizes of `entries` (key, readable stream, size), each header verified with `secret`."""
    count = tokens = total = 0
    formats: set[str] = set()
    for key, stream, size in entries:
        header = EntryReader(stream, size, EntryMac(secret, key)).header
        count, tokens, total = count + 1, tokens + header.num_tokens, total + size
        formats.add(header.layer_format.name.lower())
    return StoredEntries(tier, tuple(sorted(formats)), count, tokens, total)


def measure_disk(store_dir: Path, secret: bytes) -> StoredEntries:
    """The disk tier's entries under `store_dir`."""

    def entries() -> Iterable[tuple[str, BinaryIO, int]]:
        for path in sorted(store_dir.glob(f"*{ENTRY_SUFFIX}")):
            with path.open("rb") as stream:
                yield path.stem, stream, path.stat().st_size

    return _measure("disk", entries(), secret)


def measure_redis(url: str, secret: bytes) -> StoredEntries:
    """The Redis tier's entries at `url`."""
    import redis

    def entries(client: redis.Redis) -> Iterable[tuple[str, BinaryIO, int]]:
        for name in sorted(client.scan_iter(match=f"{KEY_PREFIX}*")):
            value = client.get(name)
            if value is not None:  # evicted since the scan
                key = name.decode().removeprefix(KEY_PREFIX)
                yield key, io.BytesIO(value), len(value)

    with redis.Redis.from_url(url) as client:
        return _measure("redis", entries(client), secret)


def with_memory_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with ``vs_memory``: its median TTFT over the memory phase's for the same mode
    (None for the memory phase itself, or a mode the memory phase did not time)."""
    memory = {row["mode"]: row["median_ttft_s"] for row in rows if row["phase"] == "memory"}
    ratios = []
    for row in rows:
        base = memory.get(row["mode"]) if row["phase"] != "memory" else None
        ratio = None if base is None else round(row["median_ttft_s"] / base, 3)
        ratios.append({**row, "vs_memory": ratio})
    return ratios
