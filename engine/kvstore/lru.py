"""Byte-accounted least-recently-used ordering, shared by the memory and disk tiers."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Generic, TypeVar

KeyT = TypeVar("KeyT", bound=Hashable)
EVICTION_LOG = 8192
"""Evicted keys remembered for `take_evicted`; older ones are forgotten if nobody asks."""


class LruBytes(Generic[KeyT]):
    """Keys from least to most recently used, each with a size, and their running total.

    Holds no data itself and takes no lock: the owning tier does both.
    """

    def __init__(self, capacity_bytes: int | None) -> None:
        if capacity_bytes is not None and capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._sizes: OrderedDict[KeyT, int] = OrderedDict()
        self._evicted: deque[KeyT] = deque(maxlen=EVICTION_LOG)

    def __contains__(self, key: KeyT) -> bool:
        return key in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    def keys(self) -> list[KeyT]:
        return list(self._sizes)

    def fits(self, size: int) -> bool:
        """Whether an item of `size` bytes could ever be held."""
        return self.capacity_bytes is None or size <= self.capacity_bytes

    def add(self, key: KeyT, size: int) -> None:
        """Record `key` as the most recently used, replacing its previous size."""
        self.remove(key)
        self._sizes[key] = size
        self.used_bytes += size

    def remove(self, key: KeyT) -> bool:
        size = self._sizes.pop(key, None)
        if size is not None:
            self.used_bytes -= size
        return size is not None

    def touch(self, key: KeyT) -> None:
        self._sizes.move_to_end(key)

    def evict_for(self, incoming_bytes: int) -> list[KeyT]:
        """Drop least recently used keys until `incoming_bytes` more fit; returns them."""
        evicted: list[KeyT] = []
        if self.capacity_bytes is None:
            return evicted
        while self._sizes and self.used_bytes + incoming_bytes > self.capacity_bytes:
            key, size = self._sizes.popitem(last=False)
            self.used_bytes -= size
            evicted.append(key)
        self._evicted.extend(evicted)
        return evicted

    def take_evicted(self, limit: int) -> list[KeyT]:
        """Up to `limit` keys evicted since the last call, oldest first (removed from the log)."""
        return [self._evicted.popleft() for _ in range(min(limit, len(self._evicted)))]
