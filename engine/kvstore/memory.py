"""In-process memory tier: a byte-bounded LRU cache of chunk KV entries."""

from __future__ import annotations

import threading

from engine.kvstore.base import KVTier
from engine.kvstore.counters import Counters
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.lru import LruBytes


class MemoryTier(KVTier):
    """Holds entries in CPU memory up to `capacity_bytes` of tensor data.

    `get` refreshes an entry's recency; `put` evicts least recently used entries until the new
    one fits. An entry larger than the whole capacity is declined (counted as "declined").
    """

    def __init__(self, capacity_bytes: int, name: str = "memory") -> None:
        self.name = name
        self._lru: LruBytes[ChunkKey] = LruBytes(capacity_bytes)
        self._entries: dict[ChunkKey, ChunkKV] = {}
        self._lock = threading.Lock()
        self._counters = Counters("hits", "misses", "puts", "evictions", "declined")

    def get(self, key: ChunkKey) -> ChunkKV | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._lru.touch(key)
        self._counters.add("misses" if entry is None else "hits")
        return entry

    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        if not self._lru.fits(entry.nbytes):
            self._counters.add("declined")
            return
        with self._lock:
            self._lru.remove(key)
            evicted = self._lru.evict_for(entry.nbytes)
            for victim in evicted:
                del self._entries[victim]
            self._lru.add(key, entry.nbytes)
            self._entries[key] = entry
        self._counters.add("puts")
        self._counters.add("evictions", len(evicted))

    def contains(self, key: ChunkKey) -> bool:
        with self._lock:
            return key in self._entries

    def delete(self, key: ChunkKey) -> bool:
        with self._lock:
            self._lru.remove(key)
            return self._entries.pop(key, None) is not None

    def take_evicted(self, limit: int) -> list[ChunkKey]:
        with self._lock:
            return self._lru.take_evicted(limit)

    def keys(self) -> list[ChunkKey]:
        """Keys from least to most recently used."""
        with self._lock:
            return self._lru.keys()

    def stats(self) -> dict[str, int]:
        with self._lock:
            sizes = {"bytes": self._lru.used_bytes, "entries": len(self._entries)}
        return self._counters.snapshot() | sizes
