"""`ChunkKVStore`: a memory tier in front of an optional slower tier, written asynchronously.

It serves an entry only for the use it was made for: every lookup says what it expects
(`EntryExpectation`), and anything else, or anything that fails to read, is a miss.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from types import TracebackType

from engine.kvstore.base import KVTier, LayerStream
from engine.kvstore.counters import Counters
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.gate import EntryGate
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier

logger = logging.getLogger(__name__)


class ChunkKVStore:
    """Looks up memory, then entries still waiting to be written, then the backing tier.

    `put` stores into memory at once and hands the backing write (disk, or any `KVTier`) to one
    background writer through a bounded queue: ingestion never waits for storage, and when the
    queue is full the backing write is dropped and counted ("dropped_writes"). Hits in the
    backing tier are promoted into memory.

    Lookups never raise because of what is stored. An entry that does not match the caller's
    `EntryExpectation` (counted "rejected"), that a tier finds damaged ("corrupt") or untrusted
    ("rejected"), or whose reading fails in any other way ("read_errors") is a miss: it is logged
    (at warning once per key), deleted from every tier, and the lookup returns None (see
    `EntryGate`); iterating a returned stream raises only `CorruptEntry`. All methods are
    thread-safe.
    """

    def __init__(
        self,
        memory: KVTier,
        backing: KVTier | None = None,
        *,
        write_queue_size: int = 64,
        read_ahead_layers: int = 2,
    ) -> None:
        if write_queue_size <= 0 or read_ahead_layers <= 0:
            raise ValueError("write_queue_size and read_ahead_layers must be positive")
        self.memory = memory
        self.backing = backing
        self._counters = Counters("misses", "pending_hits", "dropped_writes", "write_errors")
        self._gate = EntryGate(self.delete, self.memory.put, read_ahead_layers)
        self._pending: dict[ChunkKey, ChunkKV] = {}  # accepted, not yet in the backing tier
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()  # orders backing writes against deletes
        self._writes: queue.Queue[tuple[ChunkKey, ChunkKV] | None] = queue.Queue(write_queue_size)
        self._closed = False
        self._writer: threading.Thread | None = None
        if backing is not None:
            self._writer = threading.Thread(
                target=self._write_loop, args=(backing,), name="chunk-kv-writer", daemon=True
            )
            self._writer.start()

    @classmethod
    def create(
        cls,
        memory_bytes: int,
        disk_dir: str | os.PathLike[str] | None = None,
        disk_bytes: int | None = None,
        *,
        secret: bytes | None = None,
        **options: int,
    ) -> ChunkKVStore:
        """A memory tier of `memory_bytes`, backed by a disk tier when `disk_dir` is given.

        The disk tier signs and verifies its entries with `secret` (`load_or_create_secret`),
        which is required with `disk_dir`.
        """
        if disk_dir is None:
            return cls(MemoryTier(memory_bytes), None, **options)
        if secret is None:
            raise ValueError("a disk tier needs the secret that signs its entries")
        return cls(MemoryTier(memory_bytes), DiskTier(disk_dir, secret, disk_bytes), **options)

    @property
    def _tiers(self) -> list[KVTier]:
        return [self.memory] if self.backing is None else [self.memory, self.backing]

    def _pending_entry(self, key: ChunkKey) -> ChunkKV | None:
        with self._pending_lock:
            entry = self._pending.get(key)
        if entry is not None:
            self._counters.add("pending_hits")
        return entry

    def get(self, key: ChunkKey, expected: EntryExpectation) -> ChunkKV | None:
        """The whole entry for `key` from the fastest tier holding it, if it matches `expected`.

        Runs on the caller's thread and may block on the backing tier's I/O. A backing hit is
        promoted into memory. Returns None on a miss or a refused entry; never raises for one.
        """
        found = self.memory.get(key) or self._pending_entry(key)
        backing, from_backing = self.backing, False
        if found is None and backing is not None:
            found, from_backing = self._gate.read(key, lambda: backing.get(key)), True
        entry = self._gate.entry(key, found, expected)
        if entry is None:
            self._counters.add("misses")
        elif from_backing:
            self.memory.put(key, entry)
        return entry

    def prefetch_layers(self, key: ChunkKey, expected: EntryExpectation) -> LayerStream | None:
        """Stream the entry for `key` layer by layer if it matches `expected`; else None.

        Runs on the caller's thread and returns once the entry's header is read and checked (from
        memory: at once). From the backing tier, a background thread reads up to
        `read_ahead_layers` layers ahead, so the caller can work on layer i while later layers
        load; every layer is checked against `expected` as it is yielded, and a fully consumed
        stream is promoted into memory. Returns None on a miss or a refused entry and never
        raises for one. Iterating raises only `CorruptEntry` (see `LayerStream`): the entry has
        then been deleted, and the caller must treat the whole chunk as a miss.
        """
        found = self.memory.get(key) or self._pending_entry(key)
        backing = self.backing
        stream = None
        if found is not None:
            entry = self._gate.entry(key, found, expected)
            stream = None if entry is None else LayerStream.from_entry(entry)
        elif backing is not None:
            stream = self._gate.open(key, lambda: backing.load_layers(key), expected)
        if stream is None:
            self._counters.add("misses")
        return stream

    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        """Store in memory now; queue the backing write, dropping it if the queue is full."""
        with self._pending_lock:
            if self._closed:
                raise RuntimeError("ChunkKVStore is closed")
            self.memory.put(key, entry)
            if self.backing is None:
                return
            try:
                self._writes.put_nowait((key, entry))
            except queue.Full:
                self._counters.add("dropped_writes")
                logger.debug("write queue full, not persisting chunk KV %s", key)
                return
            self._pending[key] = entry  # the writer checks this under the same lock

    def _write_loop(self, backing: KVTier) -> None:
        while (item := self._writes.get()) is not None:
            key, entry = item
            with self._write_lock:
                with self._pending_lock:
                    still_wanted = self._pending.get(key) is entry
                if still_wanted:
                    try:
                        backing.put(key, entry)
                    except Exception:
                        logger.exception("failed to persist chunk KV %s", key)
                        self._counters.add("write_errors")
                with self._pending_lock:
                    if self._pending.get(key) is entry:
                        del self._pending[key]
            self._writes.task_done()
        self._writes.task_done()

    def contains(self, key: ChunkKey) -> bool:
        """Whether any tier (or the write queue) holds `key`, without reading or checking it."""
        with self._pending_lock:
            pending = key in self._pending
        return pending or any(tier.contains(key) for tier in self._tiers)

    def delete(self, key: ChunkKey) -> bool:
        """Remove `key` from every tier and cancel its pending write; whether any held it."""
        with self._write_lock:
            with self._pending_lock:
                pending = self._pending.pop(key, None) is not None
            removed = [tier.delete(key) for tier in self._tiers]
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

    def flush(self) -> None:
        """Wait until every queued backing write has finished."""
        self._writes.join()

    def stats(self) -> dict[str, int]:
        """Store counters, plus each tier's counters prefixed by its name ("disk_hits", ...).

        "corrupt" sums the tiers' damaged entries; "rejected" adds the tiers' untrusted entries
        to the store's own refusals of entries that did not match their use.
        """
        stats = self._counters.snapshot() | self._gate.counters.snapshot()
        stats["pending_writes"] = self._writes.unfinished_tasks
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
        with self._pending_lock:
            if self._closed:
                return
            self._closed = True
        if self._writer is not None:
            self.flush()
            self._writes.put(None)
            self._writer.join()
        for tier in self._tiers:
            tier.close()

    def __enter__(self) -> ChunkKVStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
