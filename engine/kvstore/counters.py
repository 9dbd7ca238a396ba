"""Thread-safe named counters for store statistics."""

from __future__ import annotations

import threading
from collections import Counter


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
