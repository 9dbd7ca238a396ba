"""Load a stored chunk or compute it again: what each costs, learned from what was done.

A hit in a slow tier (Redis across a busy network) can cost more than computing the chunk again,
for short chunks especially: every layer pays a round trip. The store asks a tier for its
estimate before loading and computes the chunk instead when that is faster (CacheBlend's
loading controller). The cost of computing comes from the engine's own prefills (`ComputeRate`).

A tier reports each timed read: its round trips (the header, latency) and its layer reads, as
bytes and the whole seconds each took (bandwidth: bytes over seconds). A load is estimated as
the larger of its round trips x latency (short chunks: the latency bound) and its bytes /
bandwidth (long chunks: the bandwidth bound; each read's own round trip is in its seconds). No
latency is subtracted from a read's time: on a fast link a layer read is no slower than the
header round trip, and the difference of two such times is noise, not a transfer time (it made
the meter report 100+ GB/s on loopback). Latency and seconds per byte are moving averages of
the tier's own reads, so
the estimate follows the link as it changes: a reading more than twice as good as the average
replaces it at once (a link that recovered is trusted again after one probe), a worse one is
averaged in (one slow read does not condemn a link for long, yet a lasting slowdown shows within
a read or two).
"""

from __future__ import annotations

import threading

SMOOTHING = 0.2
"""Weight of the newest observation in the moving averages."""
_MIN_READ_S = 1e-6
"""Floor of a read's time: a clock that did not tick is no infinitely fast link."""
_TINY = 1e-12


class LoadMeter:
    """Moving averages of one tier's round-trip latency and read bandwidth; thread-safe.

    Report small reads (a header) with `round_trip(seconds)` and large ones (a layer) with
    `transfer(nbytes, seconds)`, the whole time of the read. `estimate` is None until both have
    been seen. A tier whose format codes entries to a varying size reports each entry it opens
    with `entry_size`, and estimates then scale nominal sizes by the share entries really take.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latency_s: float | None = None
        self._seconds_per_byte: float | None = None
        self._stored_share: float | None = None

    def round_trip(self, seconds: float) -> None:
        with self._lock:
            self._latency_s = _follow(self._latency_s, seconds)

    def transfer(self, nbytes: int, seconds: float) -> None:
        """A read of `nbytes` that took `seconds`, its round trip included."""
        if nbytes <= 0:
            return
        per_byte = max(seconds, _MIN_READ_S) / nbytes
        with self._lock:
            self._seconds_per_byte = _follow(self._seconds_per_byte, per_byte)

    def entry_size(self, stored_nbytes: int, nominal_nbytes: int) -> None:
        """An entry opened: it takes `stored_nbytes` where its format's nominal size is given."""
        if nominal_nbytes <= 0:
            return
        with self._lock:
            self._stored_share = _average(self._stored_share, stored_nbytes / nominal_nbytes)

    def estimate(self, nbytes: int, round_trips: int) -> float | None:
        """Seconds to read an entry of nominal size `nbytes` in `round_trips` reads, one after
        the other; None: unknown."""
        with self._lock:
            if self._latency_s is None or self._seconds_per_byte is None:
                return None
            stored = nbytes * (self._stored_share or 1.0)
            return max(round_trips * self._latency_s, stored * self._seconds_per_byte)

    def snapshot(self) -> dict[str, int]:
        """Latency in microseconds and bandwidth in bytes per second (0 until measured)."""
        with self._lock:
            return {
                "latency_us": round((self._latency_s or 0.0) * 1e6),
                "bytes_per_s": round(1 / self._seconds_per_byte if self._seconds_per_byte else 0),
            }


def _average(previous: float | None, observed: float) -> float:
    return observed if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * observed


def _follow(previous: float | None, observed: float) -> float:
    """The moving average of a cost, or `observed` itself when it is less than half of it."""
    if previous is not None and previous <= 2 * max(observed, _TINY):
        return _average(previous, observed)
    return observed


class LoadOrRecompute:
    """Decides, per lookup and tier, whether to load a hit or have the caller compute the chunk.

    Load when the tier's estimate is unknown or below the caller's recompute time. A tier judged
    too slow is still loaded every `probe_every`-th time, so its estimate can recover when the
    link does. Thread-safe.
    """

    def __init__(self, probe_every: int = 16) -> None:
        if probe_every <= 0:
            raise ValueError("probe_every must be positive")
        self._probe_every = probe_every
        self._lock = threading.Lock()
        self._skipped: dict[str, int] = {}

    def should_load(self, tier: str, load_s: float | None, recompute_s: float | None) -> bool:
        if load_s is None or recompute_s is None or load_s <= recompute_s:
            return True
        with self._lock:
            skipped = self._skipped.get(tier, 0) + 1
            probe = skipped >= self._probe_every
            self._skipped[tier] = 0 if probe else skipped
        return probe


class ComputeRate:
    """Seconds per computed prompt token, a moving average of the caller's own prefills."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds_per_token: float | None = None

    def record(self, seconds: float, tokens: int) -> None:
        if tokens > 0:
            with self._lock:
                self._seconds_per_token = _average(self._seconds_per_token, seconds / tokens)

    def seconds_for(self, tokens: int) -> float | None:
        """Estimated seconds to compute `tokens` tokens; None before the first measurement."""
        with self._lock:
            rate = self._seconds_per_token
        return None if rate is None else rate * tokens
