"""`ChunkKVStore`: a memory tier in front of slower tiers (disk, Redis), written asynchronously.

It serves an entry only for the use it was made for: every lookup says what it expects
(`EntryExpectation`), and anything else, or anything that fails to read, is a miss.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType

from engine.kvstore.base import KVTier, LayerStream
from engine.kvstore.counters import Counters
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.gate import EntryGate
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.load_meter import LoadOrRecompute
from engine.kvstore.memory import MemoryTier
from engine.kvstore.redis_tier import RedisTier
from engine.kvstore.writer import BackingWrites


class ChunkKVStore(AbstractContextManager["ChunkKVStore"]):
    """Looks up memory, then entries still waiting to be written, then each backing tier in order.

    `put` stores into memory at once and hands the write to every backing tier (disk, Redis, or
    any `KVTier`, fastest first) to that tier's background writer through a bounded queue:
    ingestion never waits for storage, and when a queue is full that write is dropped and
    counted ("dropped_writes"). A hit in a backing tier is promoted into memory and, through the
    same queues, into the backing tiers before it.

    Lookups never raise because of what is stored. An entry that does not match the caller's
    `EntryExpectation` (counted "rejected"), that a tier finds damaged ("corrupt") or untrusted
    ("rejected"), or whose reading fails in any other way ("read_errors") is a miss: it is logged
    (at warning once per key), deleted from every tier, and the lookup returns None (see
    `EntryGate`); iterating a returned stream raises only `CorruptEntry`. All methods are
    thread-safe.
    """

    def __init__(self, memory: KVTier, *backing: KVTier, write_queue_size: int = 64) -> None:
        if write_queue_size <= 0:
            raise ValueError("write_queue_size must be positive")
        self.memory = memory
        self.backing = backing
        self._counters = Counters(
            "misses", "pending_hits", "dropped_writes", "write_errors", "recomputed_instead"
        )
        self._decision = LoadOrRecompute()
        self._gate = EntryGate(self.delete)
        self._writes = BackingWrites(backing, write_queue_size, self._counters)
        self._lock = threading.Lock()  # orders puts and promotions against close
        self._closed = False

    @classmethod
    def create(
        cls,
        memory_bytes: int,
        disk_dir: str | os.PathLike[str] | None = None,
        disk_bytes: int | None = None,
        *,
        secret: bytes | None = None,
        redis_url: str | None = None,
        redis_timeout_s: float = 0.5,
        layer_format: LayerFormat = LayerFormat.RAW,
        pinned: bool = False,
        **options: int,
    ) -> ChunkKVStore:
        """A memory tier of `memory_bytes` (in pinned memory with `pinned`: a CUDA engine's
        store), then a disk tier when `disk_dir` is given, then a Redis tier when `redis_url`
        is given.

        The slower tiers sign and verify their entries with `secret` (`load_or_create_secret`,
        or the secret shared by every server using the same Redis), required with either, and
        write in `layer_format` (memory keeps entries as they are).
        """
        backing: list[KVTier] = []
        if (disk_dir is not None or redis_url) and secret is None:
            raise ValueError("disk and Redis tiers need the secret that signs their entries")
        if disk_dir is not None and secret is not None:
            backing.append(DiskTier(disk_dir, secret, disk_bytes, layer_format=layer_format))
        if redis_url and secret is not None:
            redis = RedisTier(redis_url, secret, redis_timeout_s, layer_format=layer_format)
            backing.append(redis)
        return cls(MemoryTier(memory_bytes, pinned=pinned), *backing, **options)

    @property
    def _tiers(self) -> list[KVTier]:
        return [self.memory, *self.backing]

    def _pending_entry(self, key: ChunkKey) -> ChunkKV | None:
        entry = self._writes.pending_entry(key)
        if entry is not None:
            self._counters.add("pending_hits")
        return entry

    def get(self, key: ChunkKey, expected: EntryExpectation) -> ChunkKV | None:
        """The whole entry for `key` from the fastest tier holding it, if it matches `expected`.

        Runs on the caller's thread and may block on the backing tiers' I/O. A backing hit is
        promoted into the tiers before it. Returns None on a miss or a refused entry; never
        raises for one.
        """
        found = self.memory.get(key) or self._pending_entry(key)
        source = -1
        for index, tier in enumerate(self.backing):
            if found is not None:
                break
            found, source = self._gate.read(key, lambda tier=tier: tier.get(key)), index
        entry = self._gate.entry(key, found, expected)
        if entry is None:
            self._counters.add("misses")
        elif source >= 0:
            self._promote(key, entry, source)
        return entry

    def open_layers(
        self, key: ChunkKey, expected: EntryExpectation, recompute_s: float | None = None
    ) -> LayerStream | None:
        """Stream the entry for `key` layer by layer if it matches `expected`; else None.

        Runs on the caller's thread and returns once the entry's header is read and checked (from
        memory: at once). Each layer is read and checked against `expected` when the stream is
        iterated, on the iterating thread (`prefetch.read_ahead` reads a blend's streams ahead on
        one thread), and a stream read to its end from a backing tier is promoted into the tiers
        before it. Returns None on a miss or a refused entry and never raises for one. Iterating
        raises only `CorruptEntry` (see `LayerStream`): the entry has then been deleted, and the
        caller must treat the whole chunk as a miss.

        `recompute_s`, the caller's estimate of computing the chunk instead, skips a tier whose
        own estimate of loading it is longer (counted "recomputed_instead"; see `LoadOrRecompute`).
        """
        found = self.memory.get(key) or self._pending_entry(key)
        stream = None
        if found is not None:
            entry = self._gate.entry(key, found, expected)
            stream = None if entry is None else LayerStream.from_entry(entry)
        else:
            for index, tier in enumerate(self.backing):
                if not self._decision.should_load(
                    tier.name, tier.load_seconds(expected), recompute_s
                ):
                    self._counters.add("recomputed_instead")
                    continue
                stream = self._gate.open(
                    key,
                    lambda tier=tier: tier.load_layers(key),
                    expected,
                    lambda entry, index=index: self._promote(key, entry, index),
                )
                if stream is not None:
                    break
        if stream is None:
            self._counters.add("misses")
        return stream

    def put(self, key: ChunkKey, entry: ChunkKV, replace: bool = False) -> None:
        """Store in memory now; queue every backing write, dropping those whose queue is full.
        ``replace``: overwrite what shared tiers hold under `key` (readers find the old entry
        until then, not a miss); otherwise they may keep theirs."""
        if not self._store(key, entry, len(self.backing), replace):
            raise RuntimeError("ChunkKVStore is closed")

    def _promote(self, key: ChunkKey, entry: ChunkKV, source: int) -> None:
        """Copy a hit from backing tier `source` into memory and the backing tiers before it."""
        self._store(key, entry, source, replace=False)

    def _store(self, key: ChunkKey, entry: ChunkKV, tier_count: int, replace: bool) -> bool:
        """Whether stored: not once closed."""
        with self._lock:
            if self._closed:
                return False
            self.memory.put(key, entry)
            self._writes.queue(key, entry, tier_count, replace)
        return True

    def contains(self, key: ChunkKey) -> bool:
        """Whether any tier (or the write queue) holds `key`, without reading or checking it."""
        pending = self._writes.pending_entry(key) is not None
        return pending or any(tier.contains(key) for tier in self._tiers)

    def delete(self, key: ChunkKey) -> bool:
        """Remove `key` from every tier and cancel its pending writes; whether any held it.

        Waits for a write of `key` in progress in a tier before deleting it there.
        """
        pending = self._writes.cancel(key)
        removed = [self.memory.delete(key)]
        for writer in self._writes.writers:
            with writer.lock:
                removed.append(writer.tier.delete(key))
        return pending or any(removed)

    def take_lost_keys(self, limit_per_tier: int = 128) -> list[ChunkKey]:
        """Keys that left the store through eviction since the last call: evicted from a tier
        and held by no other. Each tier reports at most `limit_per_tier` (the rest wait for the
        next call). Deleted keys are not reported; a tier that cannot see its own evictions
        contributes none."""
        evicted: dict[ChunkKey, None] = {}
        for tier in self._tiers:
            evicted.update(dict.fromkeys(tier.take_evicted(limit_per_tier)))
        return [key for key in evicted if not self.contains(key)]

    def after_backing_write(self, callback: Callable[[], None]) -> None:
        """Call `callback` on a writer's thread after each entry a backing tier stores."""
        self._writes.after_write = callback

    def flush(self) -> None:
        """Wait until every queued backing write has finished."""
        self._writes.flush()

    def stats(self) -> dict[str, int]:
        """Store counters, plus each tier's counters prefixed by its name ("disk_hits", ...).

        "corrupt" sums the tiers' damaged entries; "rejected" adds the tiers' untrusted entries
        to the store's own refusals of entries that did not match their use.
        """
        stats = self._counters.snapshot() | self._gate.counters.snapshot()
        stats["pending_writes"] = self._writes.unfinished
        stats["corrupt"] = 0
        for tier in self._tiers:
            tier_stats = tier.stats()
            for name, value in tier_stats.items():
                stats[f"{tier.name}_{name}"] = value
            stats["corrupt"] += tier_stats.get("corrupt", 0)
            stats["rejected"] += tier_stats.get("rejected", 0)
        return stats

    def close(self) -> None:
        """Finish pending writes, stop the writer and close the tiers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._writes.stop()
        for tier in self._tiers:
            tier.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
