"""In-process memory tier: a byte-bounded LRU cache of chunk KV entries.

Serving on a CUDA GPU it keeps them in page-locked (pinned) host memory: a blend copies each
layer of its chunks to the GPU without the host waiting (`engine.blend.stream`), and only a
pinned source lets that copy run asynchronously in place; from pageable memory every layer of
every read would first be copied into a pinned buffer on the host, in the blend's layer loop.
An entry is pinned once, when it is stored, rather than at each of its reads. Torch's pinned
allocator hands out blocks of a power of two bytes, so a pinned entry is charged what its blocks
take, not its tensors' bytes: the capacity bounds the page-locked memory the entries hold.
"""

from __future__ import annotations

import threading

import torch

from engine.kvstore.base import KVTier
from engine.kvstore.counters import Counters
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.lru import LruBytes


class MemoryTier(KVTier):
    """Holds entries in CPU memory up to `capacity_bytes` of tensor data.

    `get` refreshes an entry's recency; `put` evicts least recently used entries until the new
    one fits. An entry larger than the whole capacity is declined (counted as "declined").
    With `pinned` (needs CUDA) `put` keeps a pinned copy of an entry that is not pinned already.
    """

    def __init__(self, capacity_bytes: int, name: str = "memory", pinned: bool = False) -> None:
        if pinned and not torch.cuda.is_available():
            raise ValueError("a pinned memory tier needs CUDA: page-locked memory is CUDA's")
        self.name = name
        self.pinned = pinned
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
        charge = pinned_nbytes(entry) if self.pinned else entry.nbytes
        if not self._lru.fits(charge):
            self._counters.add("declined")
            return
        if self.pinned:
            entry = _pinned(entry)
        with self._lock:
            self._lru.remove(key)
            evicted = self._lru.evict_for(charge)
            for victim in evicted:
                del self._entries[victim]
            self._lru.add(key, charge)
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


def pinned_nbytes(entry: ChunkKV) -> int:
    """Bytes of the pinned blocks holding ``entry``'s keys and values: each rounded up to a power
    of two, as torch's caching host allocator sizes them."""
    size = entry.nbytes // 2
    return 2 * (1 << (size - 1).bit_length())


def _pinned(entry: ChunkKV) -> ChunkKV:
    """``entry`` in page-locked memory: itself when it is there already."""
    if entry.keys.is_pinned() and entry.values.is_pinned():
        return entry
    return ChunkKV(entry.keys.pin_memory(), entry.values.pin_memory(), entry.token_ids)
