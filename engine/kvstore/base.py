"""The interface every chunk KV storage tier implements.

A tier maps `ChunkKey` to `ChunkKV`. `ChunkKVStore` stacks tiers (memory first, then a slower
one such as local disk) and only ever talks to them through `KVTier`, so a remote tier (Redis,
shared storage, another host) is added by implementing this class; no caller changes.

Contract shared by all primitives:
- Every method may be called from several threads at once.
- A tier is a cache: it may drop any entry at any time (eviction, corruption, capacity), and a
  lookup that cannot return an intact entry is a miss, never an error and never partial data.
- Entries are shared, not copied: callers must not modify returned tensors in place.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator
from types import TracebackType

import torch
from torch import Tensor

from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation, EntryLayout
from engine.kvstore.keys import ChunkKey

LayerKV = tuple[int, Tensor, Tensor]
"""(layer_index, k, v) with k and v shaped [num_tokens, num_kv_heads, head_dim]."""


class LayerStream(Iterator[LayerKV]):
    """The layers of one entry, yielded in order 0..num_layers-1 as they become available.

    The entry's layout (`token_ids`, `num_layers`, `num_kv_heads`, `head_dim`, `dtype`; see
    `EntryLayout`) is known before the first layer arrives. Iterating may raise `CorruptEntry` if
    a later layer turns out damaged; the layers already yielded were verified and are safe to use,
    but the entry as a whole must then be treated as a miss. Close the stream (or use it as a
    context manager) when abandoning it early, to release files and threads.
    """

    def __init__(
        self,
        layout: EntryLayout,
        layers: Generator[LayerKV, None, None],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.token_ids: list[int] = list(layout.token_ids)
        self.num_layers: int = layout.num_layers
        self.num_kv_heads: int = layout.num_kv_heads
        self.head_dim: int = layout.head_dim
        self.dtype: torch.dtype = layout.dtype
        self._layers = layers
        self._on_close = on_close

    @classmethod
    def from_entry(cls, entry: ChunkKV) -> LayerStream:
        """Stream the layers of an entry already in memory."""
        layers = ((index, *entry.layer(index)) for index in range(entry.num_layers))
        return cls(entry, layers)

    def __next__(self) -> LayerKV:
        return next(self._layers)

    def close(self) -> None:
        self._layers.close()
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> LayerStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class KVTier(ABC):
    """One level of chunk KV storage."""

    name: str
    """Short label for this tier, used to prefix its counters in `ChunkKVStore.stats()`."""

    @abstractmethod
    def get(self, key: ChunkKey) -> ChunkKV | None:
        """Return the whole intact entry for `key`, or None on a miss.

        Counts a hit or a miss. Damaged or untrusted entries are dropped and reported as misses.
        Tiers do not know what an entry will be used for: `ChunkKVStore` checks that.
        """

    @abstractmethod
    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        """Store `entry` under `key`, replacing any previous entry.

        The tier may evict other entries to make room, or decline an entry that can never fit.
        When this returns, a `get` from any thread sees the new entry (unless it was declined or
        already evicted). Raises only on unexpected I/O or backend failures. A tier shared by
        servers may keep an entry already there instead (the same chunk, computed by another);
        `replace` is how to overwrite one.
        """

    def replace(self, key: ChunkKey, entry: ChunkKV) -> None:
        """Store `entry` over any entry under `key`, atomically: a reader in another thread or
        server sees the old entry or the new one, never neither. Tiers whose `put` replaces
        keep this default."""
        self.put(key, entry)

    @abstractmethod
    def contains(self, key: ChunkKey) -> bool:
        """Whether an entry for `key` is present, without reading, verifying or counting it."""

    @abstractmethod
    def delete(self, key: ChunkKey) -> bool:
        """Remove the entry for `key`; returns whether there was one."""

    @abstractmethod
    def keys(self) -> list[ChunkKey]:
        """Keys of the entries present now (a snapshot)."""

    @abstractmethod
    def stats(self) -> dict[str, int]:
        """Counters of this tier; at least "hits", "misses", "bytes" and "entries".

        Tiers that verify what they read add "corrupt" (damaged bytes) and "rejected" (intact
        bytes this server did not write); `ChunkKVStore.stats()` sums those over its tiers.
        """

    def take_evicted(self, limit: int) -> list[ChunkKey]:
        """Up to `limit` keys this tier evicted on its own (capacity) since the last call.

        Explicit deletes are not reported. A tier whose backend evicts behind its back (a shared
        cache with its own eviction policy) cannot know, and returns [] as this default does.
        """
        return []

    def load_layers(self, key: ChunkKey) -> LayerStream | None:
        """Stream the entry for `key` layer by layer, or return None on a miss.

        Tiers that read from slow media should override this to return as soon as the entry's
        header is verified and to read each layer only when it is requested, so the caller can
        compute on layer i while layer i+1 is in flight. The default reads the whole entry.
        """
        entry = self.get(key)
        return None if entry is None else LayerStream.from_entry(entry)

    def load_seconds(self, expected: EntryExpectation) -> float | None:
        """Estimated seconds to stream the entry `expected` describes; None: unknown.

        Tiers that can be slower than computing a chunk (a remote store) measure themselves
        and override this; the store then computes instead of loading when that is faster.
        """
        return None

    def close(self) -> None:  # noqa: B027 - an optional hook; most tiers hold nothing
        """Release files, connections and threads. The default has nothing to release."""

    def __len__(self) -> int:
        return len(self.keys())
