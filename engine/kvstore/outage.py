"""Outage handling for a remote tier: failures become misses, one warning per outage, backoff.

A shared tier (Redis) can be down at start, die mid-request, hang or fill up. None of that may
turn into an error for a request or a flood of log lines or reconnects: the first failure warns,
further calls are skipped (served as misses) until a retry is due, and only one caller at a time
probes the backend, with the wait between probes doubling up to a ceiling. The first success
after an outage logs that the tier is back and resets the wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from engine.kvstore.counters import Counters


class OutageGuard:
    """Decides whether to call a backend now and tracks its outages; thread-safe.

    Call `available()` before each backend call; report its outcome with `succeeded()` or
    `failed(error)`. Every failure is counted in `counters` under `counter`.
    """

    def __init__(
        self,
        what: str,
        logger: logging.Logger,
        counters: Counters,
        counter: str = "errors",
        first_retry_s: float = 1.0,
        max_retry_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < first_retry_s <= max_retry_s:
            raise ValueError("retry waits must be positive, the first not above the ceiling")
        self._what = what
        self._logger = logger
        self._counters = counters
        self._counter = counter
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failing = False
        self._retry_wait_s = first_retry_s
        self._next_try = 0.0

    def available(self) -> bool:
        """Whether to call the backend now: always while healthy; during an outage, for one
        caller once the retry wait has passed (the others keep skipping until it reports)."""
        with self._lock:
            if not self._failing:
                return True
            now = self._clock()
            if now < self._next_try:
                return False
            self._next_try = now + self._retry_wait_s  # this caller probes; others wait
            return True

    def succeeded(self) -> None:
        with self._lock:
            was_failing, self._failing = self._failing, False
            self._retry_wait_s = self._first_retry_s
        if was_failing:
            self._logger.warning("%s: back, using it again", self._what)

    def failed(self, error: BaseException) -> None:
        """Count `error`; warn if it starts an outage; wait longer before the next try."""
        self._counters.add(self._counter)
        with self._lock:
            started, self._failing = not self._failing, True
            if not started:
                self._retry_wait_s = min(2 * self._retry_wait_s, self._max_retry_s)
            wait = self._retry_wait_s
            self._next_try = self._clock() + wait
        if started:
            self._logger.warning(
                "%s: %s; served as misses until it recovers (next try in %.1f s)",
                self._what,
                error,
                wait,
            )
        else:
            self._logger.debug("%s still failing: %s (next try in %.1f s)", self._what, error, wait)
