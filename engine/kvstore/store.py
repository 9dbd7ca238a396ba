"""`ChunkKVStore`: a memory tier in front of an optional slower tier, written asynchronously."""

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
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier
from engine.kvstore.prefetch import read_ahead

logger = logging.getLogger(__name__)


class ChunkKVStore:
    """Looks up memory, then entries still waiting to be written, then the backing tier.

    `put` stores into memory at once and hands the backing write (disk, or any `KVTier`) to one
    background writer through a bounded queue: ingestion never waits for storage, and when the
    queue is full the backing write is dropped and counted ("dropped_writes"). Hits in the
    backing tier are promoted into memory. All methods are thread-safe.
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
        self.read_ahead_layers = read_ahead_layers
        self._counters = Counters("misses", "pending_hits", "dropped_writes", "write_errors")
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
        **options: int,
    ) -> ChunkKVStore:
        """A memory tier of `memory_bytes`, backed by a disk tier when `disk_dir` is given."""
        disk = None if disk_dir is None else DiskTier(disk_dir, disk_bytes)
        return cls(MemoryTier(memory_bytes), disk, **options)

    @property
    def _tiers(self) -> list[KVTier]:
        return [self.memory] if self.backing is None else [self.memory, self.backing]

    def _pending_entry(self, key: ChunkKey) -> ChunkKV | None:
        with self._pending_lock:
            entry = self._pending.get(key)
        if entry is not None:
            self._counters.add("pending_hits")
        return entry

    def get(self, key: ChunkKey) -> ChunkKV | None:
        """The entry for `key` from the fastest tier holding it, or None."""
        entry = self.memory.get(key) or self._pending_entry(key)
        if entry is None and self.backing is not None:
            entry = self.backing.get(key)
            if entry is not None:
                self.memory.put(key, entry)
        if entry is None:
            self._counters.add("misses")
        return entry

    def prefetch_layers(self, key: ChunkKey) -> LayerStream | None:
        """Stream the entry for `key` layer by layer, or None on a miss.

        From the backing tier, a background thread reads up to `read_ahead_layers` layers ahead,
        so the caller can work on layer i while later layers load; a fully consumed stream is
        promoted into memory. Iteration may raise `CorruptEntry` (see `LayerStream`).
        """
        entry = self.memory.get(key) or self._pending_entry(key)
        if entry is not None:
            return LayerStream.from_entry(entry)
        source = None if self.backing is None else self.backing.load_layers(key)
        if source is None:
            self._counters.add("misses")
            return None
        return read_ahead(source, self.read_ahead_layers, lambda full: self.memory.put(key, full))

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

    def flush(self) -> None:
        """Wait until every queued backing write has finished."""
        self._writes.join()

    def stats(self) -> dict[str, int]:
        """Store counters, plus each tier's counters prefixed by its name ("disk_hits", ...)."""
        stats = self._counters.snapshot()
        stats["pending_writes"] = self._writes.unfinished_tasks
        stats["corrupt"] = 0
        for tier in self._tiers:
            for name, value in tier.stats().items():
                stats[f"{tier.name}_{name}"] = value
            stats["corrupt"] += stats.get(f"{tier.name}_corrupt", 0)
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
