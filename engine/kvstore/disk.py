"""Local disk tier: one MAC-signed file per entry, written atomically, kept across restarts."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import BinaryIO

from engine.kvstore.atomic import fsync_directory, remove_temp_files, write_synced_temp
from engine.kvstore.base import KVTier, LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry, EntryReader, UntrustedEntry
from engine.kvstore.counters import Counters, RefusalLog
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.lru import LruBytes
from engine.kvstore.mac import EntryMac, check_secret

logger = logging.getLogger(__name__)

ENTRY_SUFFIX = ".kv"


class DiskTier(KVTier):
    """Entries as `<directory>/<key>.kv` files in the `codec` format, signed with `secret`.

    Writes go to a hidden temp file that is fsynced and then renamed over the final name, so a
    crash leaves either the old entry or the new one, never a torn file. Reads verify the header
    and every layer MAC. A file that is damaged, truncated, forged or copied from another key
    fails a MAC or the layout and is counted as "corrupt"; a well-formed file of another format
    version or written with another secret is counted as "rejected". Either is logged (once per
    key at warning), deleted and reported as a miss. A new instance on the same directory with
    the same secret finds the existing entries. New entries are written in `layer_format`;
    entries are read in whichever format they were written.

    With `capacity_bytes`, the least recently used files (by modification time, which `get`
    refreshes, so the order survives restarts) are deleted to make room. One process should own a
    directory for writing: a new instance removes temp files left behind by a crashed writer.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        secret: bytes,
        capacity_bytes: int | None = None,
        name: str = "disk",
        layer_format: LayerFormat = LayerFormat.RAW,
    ) -> None:
        check_secret(secret)
        self.name = name
        self.layer_format = layer_format
        self.directory = Path(directory)
        self._secret = secret
        self._lru: LruBytes[ChunkKey] = LruBytes(capacity_bytes)
        self._lock = threading.Lock()
        self._counters = Counters(
            "hits", "misses", "puts", "evictions", "declined", "corrupt", "rejected"
        )
        self._refusals = RefusalLog(logger)
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_temp_files(self.directory)
        self._index_existing_files()

    def _path(self, key: ChunkKey) -> Path:
        return self.directory / f"{key}{ENTRY_SUFFIX}"

    def _mac(self, key: ChunkKey) -> EntryMac:
        return EntryMac(self._secret, key)

    def _index_existing_files(self) -> None:
        found = []
        for path in self.directory.glob(f"*{ENTRY_SUFFIX}"):
            if ChunkKey.is_valid(path.stem):
                stat = path.stat()
                found.append((stat.st_mtime_ns, ChunkKey(path.stem), stat.st_size))
        with self._lock:
            for _, key, size in sorted(found):
                self._lru.add(key, size)
            self._evict_until_room(0)

    def _evict_until_room(self, incoming_bytes: int) -> None:
        """Delete least recently used files until `incoming_bytes` fit. Caller holds the lock."""
        for victim in self._lru.evict_for(incoming_bytes):
            self._path(victim).unlink(missing_ok=True)
            self._counters.add("evictions")

    def _touch(self, key: ChunkKey, size: int) -> None:
        """Mark `key` most recently used, in the index and in the file's mtime."""
        path = self._path(key)
        with self._lock:
            try:
                os.utime(path)
            except FileNotFoundError:
                return
            if key in self._lru:
                self._lru.touch(key)
            else:  # written by another instance since this one started
                self._lru.add(key, size)

    def _discard(self, key: ChunkKey, error: CorruptEntry) -> None:
        """Count, log and delete a file that failed verification."""
        kind = "rejected" if isinstance(error, UntrustedEntry) else "corrupt"
        path = self._path(key)
        self._refusals.refused(key, "deleting %s chunk KV file %s: %s", kind, path, error)
        self._counters.add(kind)
        with self._lock:
            self._lru.remove(key)
            path.unlink(missing_ok=True)

    def _open(self, key: ChunkKey) -> tuple[BinaryIO, EntryReader] | None:
        """Open the file for `key` and verify its header; None (counted) on a miss."""
        try:
            file = open(self._path(key), "rb")  # noqa: SIM115 - closed by the caller
        except FileNotFoundError:
            self._counters.add("misses")
            return None
        try:
            return file, EntryReader(file, os.fstat(file.fileno()).st_size, self._mac(key))
        except CorruptEntry as error:
            file.close()
            self._discard(key, error)
            self._counters.add("misses")
            return None
        except BaseException:
            file.close()
            raise

    def get(self, key: ChunkKey) -> ChunkKV | None:
        opened = self._open(key)
        if opened is None:
            return None
        file, reader = opened
        with file:
            try:
                entry = ChunkKV.read_from(reader)
            except CorruptEntry as error:
                self._discard(key, error)
                self._counters.add("misses")
                return None
        self._counters.add("hits")
        self._touch(key, reader.header.total_nbytes)
        return entry

    def load_layers(self, key: ChunkKey) -> LayerStream | None:
        """Verify the header now; read and verify each layer only when it is requested.

        A layer found damaged mid-stream deletes the file and raises `CorruptEntry`; layers
        yielded before it passed their own MACs.
        """
        opened = self._open(key)
        if opened is None:
            return None
        file, reader = opened
        self._counters.add("hits")
        self._touch(key, reader.header.total_nbytes)
        layers = self._read_layers(key, file, reader)
        return LayerStream(reader.header, layers, file.close)

    def _read_layers(
        self, key: ChunkKey, file: BinaryIO, reader: EntryReader
    ) -> Generator[LayerKV, None, None]:
        with file:
            for index in range(reader.header.num_layers):
                try:
                    k, v = reader.read_layer(index)
                except CorruptEntry as error:
                    self._discard(key, error)
                    raise
                yield index, k, v

    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        """Store `entry`, unless even its uncoded size exceeds the tier (counted "declined")."""
        if not self._lru.fits(entry.encoded_nbytes(self.layer_format)):
            self._counters.add("declined")
            return
        mac = self._mac(key)
        layer_format = self.layer_format
        temp = write_synced_temp(
            self.directory, key, lambda out: entry.write_to(out, mac, layer_format)
        )
        try:
            size = temp.stat().st_size  # a coded format's size is known once written
            with self._lock:
                self._lru.remove(key)
                self._evict_until_room(size)
                os.replace(temp, self._path(key))
                self._lru.add(key, size)
        finally:
            temp.unlink(missing_ok=True)
        fsync_directory(self.directory)
        self._counters.add("puts")

    def contains(self, key: ChunkKey) -> bool:
        return self._path(key).exists()

    def delete(self, key: ChunkKey) -> bool:
        with self._lock:
            self._lru.remove(key)
            try:
                self._path(key).unlink()
            except FileNotFoundError:
                return False
        return True

    def take_evicted(self, limit: int) -> list[ChunkKey]:
        with self._lock:
            return self._lru.take_evicted(limit)

    def keys(self) -> list[ChunkKey]:
        """Keys of the entry files in the directory, in no particular order."""
        paths = self.directory.glob(f"*{ENTRY_SUFFIX}")
        return [ChunkKey(path.stem) for path in paths if ChunkKey.is_valid(path.stem)]

    def stats(self) -> dict[str, int]:
        with self._lock:
            sizes = {"bytes": self._lru.used_bytes, "entries": len(self._lru)}
        return self._counters.snapshot() | sizes
