"""Warnings about refused chunk-KV entries, at most one per key.

A refused entry is deleted, so the next lookup is an ordinary miss; but whoever rewrote the file
can rewrite it again on every request. Logging the first refusal of each key at warning level and
the repeats at debug keeps the operator informed without letting a file flood the log.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from engine.kvstore.keys import ChunkKey


class RefusalLog:
    """Logs refusals to `logger`: warning the first time for a key, debug afterwards.

    Remembers the last `remembered` keys it warned about. Thread-safe.
    """

    def __init__(self, logger: logging.Logger, remembered: int = 4096) -> None:
        self._logger = logger
        self._remembered = remembered
        self._warned: OrderedDict[ChunkKey, None] = OrderedDict()
        self._lock = threading.Lock()

    def refused(self, key: ChunkKey, message: str, *args: object) -> None:
        """Log `message % args` about `key`."""
        with self._lock:
            first = key not in self._warned
            self._warned[key] = None
            self._warned.move_to_end(key)
            if len(self._warned) > self._remembered:
                self._warned.popitem(last=False)
        self._logger.log(logging.WARNING if first else logging.DEBUG, message, *args)
