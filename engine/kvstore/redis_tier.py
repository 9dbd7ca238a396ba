"""Redis tier: chunk KV shared by every server that serves the same model from one Redis.

Keys are content-addressed (`ChunkKey` hashes the model fingerprint and the chunk's tokens), so
any server finds the chunks any other computed. Each entry is one Redis string in the `codec`
format, signed with the shared secret; it is read with GETRANGE, the header first and then one
layer at a time, so a hit streams into the blend like a disk hit. One string per entry keeps
writes and Redis's own eviction atomic: an entry is there whole or not at all.

Redis is a cache here, and an unreliable one: an entry may vanish at any moment (its
`maxmemory-policy`), and Redis may be down, slow or full. Every such failure is a miss, counted
in "errors", logged once per outage, and the tier retries with a growing wait (`OutageGuard`).
Between two ranged reads another server may replace the entry (settling its chunk) or Redis evict
it: the bytes then fail their MAC though nothing is damaged, so a failing entry is compared with
the one opened first, and one that changed is a miss counted "changed", not deleted as corrupt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from typing import Any

import torch

from engine.kvstore.base import KVTier, LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry, EntryHeader, EntryReader, UntrustedEntry
from engine.kvstore.counters import Counters, RefusalLog
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat, layer_nbytes
from engine.kvstore.load_meter import LoadMeter
from engine.kvstore.mac import EntryMac, check_secret
from engine.kvstore.range_reader import RangeReader
from engine.kvstore.redis_link import RedisLink, Skipped

logger = logging.getLogger(__name__)

KEY_PREFIX = "ragblend:kv:"
HEAD_BYTES = 64 * 1024
"""Bytes fetched with the entry's length in the first round trip: the whole header of any
chunk up to several thousand tokens."""
READ_OUTCOMES = ("hits", "misses", "corrupt", "rejected", "changed")
"""What reading an entry came to; the last three are entries that could not be used."""


class RedisTier(KVTier):
    """Entries as Redis strings under `ragblend:kv:<key>`, signed and checked with `secret`.

    Servers sharing a Redis must share the secret: an entry signed with another one is counted
    "rejected" and left alone (it is valid for its writer); a damaged or truncated one is counted
    "corrupt" and deleted. Writes use SET NX: an entry already there is the same chunk. New
    entries are written in `layer_format`; entries are read in whichever format they were written.
    """

    def __init__(
        self,
        url: str,
        secret: bytes,
        timeout_s: float = 0.5,
        first_retry_s: float = 1.0,
        name: str = "redis",
        layer_format: LayerFormat = LayerFormat.RAW,
    ) -> None:
        check_secret(secret)
        self.name = name
        self.layer_format = layer_format
        self._secret = secret
        self._counters = Counters(*READ_OUTCOMES, "puts", "present", "errors", "skipped")
        self._refusals = RefusalLog(logger)
        self._meter = LoadMeter()
        self._redis = RedisLink(url, timeout_s, first_retry_s, self._counters, logger)

    @staticmethod
    def _name(key: ChunkKey) -> str:
        return KEY_PREFIX + key

    def _refuse(self, key: ChunkKey, error: CorruptEntry, head: bytes) -> CorruptEntry:
        """Count and log an entry that failed verification, and return the error to raise: a
        damaged one is deleted, an untrusted one left, and one that is no longer the entry whose
        first bytes were `head` is left too (the newer entry is sound)."""
        if not isinstance(error, UntrustedEntry) and self._changed_since(key, head):
            self._counters.add("changed")
            return CorruptEntry(f"chunk KV {key} was replaced or evicted while it was read")
        untrusted = isinstance(error, UntrustedEntry)
        self._counters.add("rejected" if untrusted else "corrupt")
        action = "ignoring" if untrusted else "deleting"
        self._refusals.refused(key, "%s chunk KV %s in Redis: %s", action, key, error)
        if not untrusted:
            self.delete(key)
        return error

    def _changed_since(self, key: ChunkKey, head: bytes) -> bool:
        now = self._redis.call(lambda client: client.getrange(self._name(key), 0, len(head) - 1))
        return not isinstance(now, Skipped) and now != head

    def _open(self, key: ChunkKey) -> tuple[EntryReader, bytes] | None:
        """Fetch the entry's length and head, verify its header; the reader and the head's bytes,
        or None (counted) on a miss."""
        name = self._name(key)

        def head(client: Any) -> tuple[int, int, bytes]:
            with client.pipeline(transaction=False) as pipe:  # MULTI is refused when full
                pipe.exists(name).strlen(name).getrange(name, 0, HEAD_BYTES - 1)
                return tuple(pipe.execute())

        started = time.perf_counter()
        found = self._redis.call(head)
        if isinstance(found, Skipped) or not found[0]:
            self._counters.add("misses")
            return None
        self._meter.round_trip(time.perf_counter() - started)
        _, size, first = found

        def read_range(start: int, end: int) -> bytes:
            began = time.perf_counter()
            data = self._redis.client.getrange(name, start, end)
            self._meter.transfer(len(data), time.perf_counter() - began)
            return data

        try:
            reader = EntryReader(RangeReader(first, read_range), size, EntryMac(self._secret, key))
            self._measure_size(reader.header)
            return reader, first
        except CorruptEntry as error:
            self._refuse(key, error, first)
        except self._redis.errors as error:
            self._redis.failed(error)
        self._counters.add("misses")
        return None

    def _measure_size(self, header: EntryHeader) -> None:
        """Teach the meter what entries in this tier's format really take (lossless varies)."""
        if header.layer_format == self.layer_format:
            geometry = (header.num_tokens, header.num_kv_heads, header.head_dim)
            nominal = layer_nbytes(self.layer_format, header.dtype, *geometry)
            self._meter.entry_size(sum(header.layer_lengths), header.num_layers * nominal)

    def get(self, key: ChunkKey) -> ChunkKV | None:
        stream = self.load_layers(key)
        if stream is None:
            return None
        with stream:
            layers = list(stream)
        keys, values = zip(*[(k, v) for _, k, v in layers], strict=True)
        return ChunkKV(torch.stack(keys), torch.stack(values), stream.token_ids)

    def load_layers(self, key: ChunkKey) -> LayerStream | None:
        """Verify the header now; fetch and verify each layer when it is requested.

        A damaged layer deletes the entry and raises `CorruptEntry`; so do an entry replaced or
        evicted mid-read and a Redis failure mid-entry (counted "changed" or "errors", the entry
        kept), since the entry cannot be finished.
        """
        opened = self._open(key)
        if opened is None:
            return None
        self._counters.add("hits")
        reader, head = opened
        return LayerStream(reader.header, self._read_layers(key, reader, head))

    def _read_layers(
        self, key: ChunkKey, reader: EntryReader, head: bytes
    ) -> Generator[LayerKV, None, None]:
        for index in range(reader.header.num_layers):
            try:
                k, v = reader.read_layer(index)
            except CorruptEntry as error:
                refused = self._refuse(key, error, head)
                if refused is error:
                    raise
                raise refused from error
            except self._redis.errors as error:
                self._redis.failed(error)
                raise CorruptEntry(f"Redis failed while reading layer {index}: {error}") from error
            yield index, k, v

    def load_seconds(self, expected: EntryExpectation) -> float | None:
        """From this tier's recent reads: a round trip for the header and one a layer, the bytes
        in this tier's format scaled by the share of that size recent entries took (lossless:
        about 0.68 of its uncoded size)."""
        geometry = (expected.num_tokens, expected.num_kv_heads, expected.head_dim)
        layer_bytes = layer_nbytes(self.layer_format, expected.dtype, *geometry)
        rounds = 1 + expected.num_layers
        return self._meter.estimate(expected.num_layers * layer_bytes, round_trips=rounds)

    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        """Store `entry` unless an entry for `key` is there; failures are counted, not raised.

        Serializes only when Redis is available, and sends nothing when the entry is there.
        """
        name = self._name(key)

        def store(client: Any) -> bool:
            if client.exists(name):
                return False
            data = entry.to_bytes(EntryMac(self._secret, key), self.layer_format)
            return bool(client.set(name, data, nx=True))

        stored = self._redis.call(store, write=True)
        if not isinstance(stored, Skipped):
            self._counters.add("puts" if stored else "present")

    def replace(self, key: ChunkKey, entry: ChunkKV) -> None:
        """One SET over whatever is there (a failure is counted, not raised)."""
        name = self._name(key)

        def store(client: Any) -> bool:
            data = entry.to_bytes(EntryMac(self._secret, key), self.layer_format)
            return bool(client.set(name, data))

        if not isinstance(self._redis.call(store, write=True), Skipped):
            self._counters.add("puts")

    def contains(self, key: ChunkKey) -> bool:
        found = self._redis.call(lambda client: client.exists(self._name(key)))
        return not isinstance(found, Skipped) and found > 0

    def delete(self, key: ChunkKey) -> bool:
        removed = self._redis.call(lambda client: client.delete(self._name(key)))
        return not isinstance(removed, Skipped) and removed > 0

    def keys(self) -> list[ChunkKey]:
        """Keys of the entries in Redis now (a SCAN); empty while Redis is unavailable."""

        def scan(client: Any) -> list[ChunkKey]:
            names = client.scan_iter(match=f"{KEY_PREFIX}*", count=1000)
            texts = (name.decode().removeprefix(KEY_PREFIX) for name in names)
            return [ChunkKey(text) for text in texts if ChunkKey.is_valid(text)]

        found = self._redis.call(scan)
        return [] if isinstance(found, Skipped) else found

    def stats(self) -> dict[str, int]:
        """This server's counters. "bytes" and "entries" are 0: the shared store's size is
        Redis's own (`INFO memory`), and asking it on every call would cost a round trip."""
        return self._counters.snapshot() | self._meter.snapshot() | {"bytes": 0, "entries": 0}

    def close(self) -> None:
        self._redis.close()
