"""The chunk-store tiers `bench_blend` compares, what their stored entries weigh, and how fast
they stream.

Each phase of the TTFT benchmark serves chunk KV from one tier: the memory tier, or a memory
tier too small to hold a chunk in front of the disk tier or of a Redis tier (then with a disk tier
too small to hold one either), each slow tier in the raw, lossless or int8 format. After the chunks
are stored, the slow tier's entries are read back and their headers verified, which gives the
bytes per token each format really costs on the model, headers and scales included.

    python -m load_tests.bench_tiers <data dir>/chunk_kv [--chunks 6] [--repeats 9]

times the load path alone, without the engine: a server's largest stored chunks streamed layer by
layer from the memory tier and from a disk and a Redis tier in each format (its own redis-server).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.kvstore.base import KVTier
from engine.kvstore.codec import EntryReader
from engine.kvstore.disk import ENTRY_SUFFIX, DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.mac import EntryMac
from engine.kvstore.memory import MemoryTier
from engine.kvstore.redis_tier import KEY_PREFIX, RedisTier
from engine.kvstore.secret import load_or_create_secret

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


def stream_seconds(tier: KVTier, keys: list[ChunkKey], repeats: int) -> list[float]:
    """Seconds to stream every layer of every entry under `keys` from `tier`, once per repeat."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for key in keys:
            stream = tier.load_layers(key)
            if stream is None:
                raise RuntimeError(f"{tier.name} lost {key}")
            with stream:
                for _ in stream:
                    pass
        samples.append(time.perf_counter() - started)
    return samples


def main() -> int:
    """Stream a server's largest stored chunks from each tier and format: the load path alone."""
    from load_tests.redis_launcher import running_redis

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("chunk_kv", type=Path, help="a server's <data dir>/chunk_kv")
    parser.add_argument("--chunks", type=int, default=6, help="the largest entries, one prompt")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    secret = load_or_create_secret(args.chunk_kv / "secret")
    paths = sorted((args.chunk_kv / "store").glob(f"*{ENTRY_SUFFIX}"), key=_size)
    tiers: dict[str, KVTier] = {"memory": MemoryTier(1 << 34)}
    entries = {}
    for path in paths[-args.chunks :]:
        with path.open("rb") as stream:
            reader = EntryReader(stream, _size(path), EntryMac(secret, path.stem))
            entries[ChunkKey(path.stem)] = ChunkKV.read_from(reader)
    print(f"{len(entries)} chunks, {sum(e.num_tokens for e in entries.values())} tokens")
    with tempfile.TemporaryDirectory() as workdir, running_redis(Path(workdir) / "r") as url:
        for form in LayerFormat:
            name = form.name.lower()
            tiers[f"disk-{name}"] = DiskTier(Path(workdir) / name, secret, layer_format=form)
            tiers[f"redis-{name}"] = RedisTier(url, secret, 5.0, name=name, layer_format=form)
        for name, tier in tiers.items():
            for key, entry in entries.items():
                tier.put(key, entry)
            samples = stream_seconds(tier, list(entries), args.repeats)
            print(f"{name:16} min {min(samples):.3f} s  median {statistics.median(samples):.3f} s")
            if isinstance(tier, RedisTier):
                meter = tier.stats()
                print(f"{'':16} meter: {meter['latency_us']} us, {meter['bytes_per_s']:,} B/s")
                for key in entries:  # the next format's entries are written afresh
                    tier.delete(key)
    return 0


def _size(path: Path) -> int:
    return path.stat().st_size


if __name__ == "__main__":
    sys.exit(main())
