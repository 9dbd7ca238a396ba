"""How the chunk store reports what happened: thread-safe counters and once-per-key warnings.

A refused entry is deleted, so the next lookup is an ordinary miss; but whoever rewrote the file
can rewrite it again on every request. `RefusalLog` warns about the first refusal of each key and
logs the repeats at debug, keeping the operator informed without letting a file flood the log.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict

from engine.kvstore.keys import ChunkKey


class Counters:
    """Integer counters that several threads may bump at once."""

    def __init__(self, *names: str) -> None:
        self._lock = threading.Lock()
        self._values: Counter[str] = Counter(dict.fromkeys(names, 0))

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter, including those still at zero."""
        with self._lock:
            return dict(self._values)


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
