"""A read-only file over a remote byte string read by ranges, for `EntryReader`.

The Redis tier keeps each entry as one string and reads it like a file: the header from bytes
fetched with the first round trip, each layer with one ranged read (GETRANGE) when it is needed.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any


class RangeReader(io.RawIOBase):
    """A seekable read-only file: `head` holds its first bytes, `read_range(first, last)` (both
    inclusive, as GETRANGE takes them) returns any other range."""

    def __init__(self, head: bytes, read_range: Callable[[int, int], bytes]) -> None:
        super().__init__()
        self._head = head
        self._read_range = read_range
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET:
            raise io.UnsupportedOperation("only absolute seeks")
        self._position = offset
        return offset

    def readinto(self, buffer: Any) -> int:
        wanted = memoryview(buffer).cast("B")
        end = self._position + len(wanted)
        if end <= len(self._head):
            data = self._head[self._position : end]
        else:
            data = self._read_range(self._position, end - 1)
        wanted[: len(data)] = data
        self._position += len(data)
        return len(data)
