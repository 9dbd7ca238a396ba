"""Asynchronous writes into the backing tiers, so a slow tier never delays a request or a tier.

Each backing tier of `ChunkKVStore` gets its own bounded queue and thread (`TierWriter`): a
Redis that hangs until its timeout holds up neither the disk tier's writes nor the caller, which
only enqueues, and drops the write when the queue is full. `BackingWrites` keeps the entries
accepted but not yet written everywhere, so lookups still find them and deletes cancel them.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.kvstore.base import KVTier
from engine.kvstore.counters import Counters
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey

logger = logging.getLogger(__name__)


Write = Callable[[ChunkKey, ChunkKV, bool], None]
"""Writes an entry into a tier: its key, the entry, and whether it replaces one stored."""


class TierWriter:
    """Drains a queue of (key, entry, replace) writes for `tier` on a daemon thread, calling
    `write`.

    `lock` is held around each `write`, so a delete can wait for a write in progress.
    """

    def __init__(self, tier: KVTier, queue_size: int, write: Write) -> None:
        self.tier = tier
        self.lock = threading.Lock()
        self._write = write
        self._queue: queue.Queue[tuple[ChunkKey, ChunkKV, bool] | None] = queue.Queue(queue_size)
        self._thread = threading.Thread(
            target=self._loop, name=f"chunk-kv-writer-{tier.name}", daemon=True
        )
        self._thread.start()

    def offer(self, key: ChunkKey, entry: ChunkKV, replace: bool = False) -> bool:
        """Queue a write without waiting; False when the queue is full."""
        try:
            self._queue.put_nowait((key, entry, replace))
        except queue.Full:
            return False
        return True

    @property
    def unfinished(self) -> int:
        """Writes queued or in progress."""
        return self._queue.unfinished_tasks

    def flush(self) -> None:
        self._queue.join()

    def stop(self) -> None:
        """Finish the queued writes, then end the thread."""
        self.flush()
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        _yield_to_the_engine()
        while (item := self._queue.get()) is not None:
            try:
                with self.lock:
                    self._write(*item)
            finally:
                self._queue.task_done()
        self._queue.task_done()


def _yield_to_the_engine() -> None:
    """Lower this thread's CPU priority to the least (Linux: nice 19 for this thread alone).

    A write encodes, signs and copies a whole entry; run beside the engine's compute threads
    it takes a core from them when there are no spare ones, and every step (the decoding of
    the very request whose chunks are being written) waits for the slowest thread. Writes are
    not on any request's path: they can wait for the idle moments.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError) as exc:  # not Linux, or not permitted
        logger.debug("could not lower the chunk KV writer's priority: %s", exc)


@dataclass
class _Pending:
    """An accepted entry and the backing tiers (by index) it has still to be written to."""

    entry: ChunkKV
    tiers: set[int] = field(default_factory=set)


class BackingWrites:
    """One `TierWriter` per backing tier and the entries still waiting for theirs; thread-safe.

    Counts "dropped_writes" (a queue was full) and "write_errors" (a tier's `put` raised) in
    `counters`.
    """

    def __init__(self, tiers: Sequence[KVTier], queue_size: int, counters: Counters) -> None:
        self._counters = counters
        self._lock = threading.Lock()
        self._pending: dict[ChunkKey, _Pending] = {}
        self.after_write: Callable[[], None] | None = None
        """Called on a writer's thread after each entry it stored (see `ChunkKVStore`)."""
        self.writers = [
            TierWriter(tier, queue_size, self._write_function(index, tier))
            for index, tier in enumerate(tiers)
        ]

    def queue(self, key: ChunkKey, entry: ChunkKV, tier_count: int, replace: bool = False) -> None:
        """Queue writes of `entry` to the first `tier_count` backing tiers (over what they hold
        under `key` when `replace`)."""
        with self._lock:
            queued = set()
            for index, writer in enumerate(self.writers[:tier_count]):
                if writer.offer(key, entry, replace):
                    queued.add(index)
                else:
                    self._counters.add("dropped_writes")
                    logger.debug("%s write queue full, dropping chunk KV %s", writer.tier.name, key)
            if not queued:
                return
            pending = self._pending.get(key)
            if pending is not None and pending.entry is entry:
                pending.tiers |= queued
            else:
                self._pending[key] = _Pending(entry, queued)

    def pending_entry(self, key: ChunkKey) -> ChunkKV | None:
        """The entry accepted for `key` that some tier has still to write, if any."""
        with self._lock:
            pending = self._pending.get(key)
        return None if pending is None else pending.entry

    def cancel(self, key: ChunkKey) -> bool:
        """Forget the pending writes of `key`; whether there were any."""
        with self._lock:
            return self._pending.pop(key, None) is not None

    @property
    def unfinished(self) -> int:
        return sum(writer.unfinished for writer in self.writers)

    def flush(self) -> None:
        for writer in self.writers:
            writer.flush()

    def stop(self) -> None:
        for writer in self.writers:
            writer.stop()

    def _written(self) -> None:
        try:
            if self.after_write is not None:
                self.after_write()
        except Exception:  # the writer thread must outlive a faulty callback
            logger.exception("the chunk KV store's after-write callback failed")

    def _write_function(self, index: int, tier: KVTier) -> Write:
        """What tier `index`'s writer does with a queued entry: write it if still wanted."""

        def write(key: ChunkKey, entry: ChunkKV, replace: bool) -> None:
            with self._lock:
                pending = self._pending.get(key)
                wanted = pending is not None and pending.entry is entry and index in pending.tiers
            if wanted:
                try:
                    (tier.replace if replace else tier.put)(key, entry)
                except Exception:
                    logger.exception("failed to store chunk KV %s in the %s tier", key, tier.name)
                    self._counters.add("write_errors")
                else:
                    self._written()
            with self._lock:
                pending = self._pending.get(key)
                if pending is not None and pending.entry is entry:
                    pending.tiers.discard(index)
                    if not pending.tiers:
                        del self._pending[key]

        return write
