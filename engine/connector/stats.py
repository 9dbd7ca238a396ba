"""Per-request blend statistics, handed from the worker to the front end over a datagram socket.

The one way back: the worker posts a request's statistics, under the id the front end gave the
request (the plan's ``stats_id``), before the forward pass that first computes it, so they are
waiting when the request's first output reaches the front end. They cannot ride vLLM's own
outputs: a request that ends on a stop string is finished by vLLM's front end itself and
aborted in the engine, and vLLM's worker -> scheduler channel reports a step's statistics only
after the requests finishing in that step. The front end reads the socket whenever it becomes
readable (``watch``) and hands a request its statistics when it finishes (``collect``). The
worker also posts evictions its store makes between requests (a slower tier's writer making
room), which the front end hands on as they arrive (``on_evictions``). The
socket lives in Linux's abstract namespace under a name unique to one engine start: it exists
exactly as long as the front end holds it, and no other process can remove it (files could be,
by a second server pointed at the same data dir). Nothing here raises into the engine: a lost
message is a request without statistics, logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable

from engine.contract import BlendStats, StoreEvictions

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 64 * 1024
RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024
SEND_TIMEOUT_S = 0.05
"""How long a post may wait for the front end to make room: Linux queues only
``net.unix.max_dgram_qlen`` (often 10) datagrams, fewer than one step's jobs can post."""
MAX_UNCOLLECTED = 4096
"""Statistics of requests that never finish (aborted early) are dropped past this many."""


def _address(channel: str) -> str:
    if not channel:
        raise ValueError("the statistics channel needs a name")
    return f"\0ragblend-stats-{channel}"


class StatsInbox:
    """The front end's side: owns the socket; ``collect`` is called when a request finishes."""

    def __init__(
        self, channel: str, on_evictions: Callable[[StoreEvictions], None] | None = None
    ) -> None:
        """``on_evictions`` is called with each eviction report where the socket is read (the
        event loop, once watching)."""
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        self._socket.bind(_address(channel))
        self._socket.setblocking(False)
        self._received: dict[str, BlendStats] = {}
        self._on_evictions = on_evictions
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self) -> None:
        """Drain the socket from the running event loop whenever a message arrives, so a burst
        of requests never fills it; called on every submission, cheap once watching."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._socket.fileno())
        loop.add_reader(self._socket.fileno(), self.drain)
        self._loop = loop

    def drain(self) -> None:
        """Read every message waiting (cheap when none)."""
        while True:
            try:
                data = self._socket.recv(MAX_MESSAGE_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                log.warning("reading blend statistics failed: %s", exc)
                break
            try:
                self._take(json.loads(data))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("dropping a malformed blend statistics message: %s", exc)
        while len(self._received) > MAX_UNCOLLECTED:
            del self._received[next(iter(self._received))]

    def _take(self, message: dict) -> None:
        if "evictions" in message:
            evictions = StoreEvictions.from_dict(message["evictions"])
            if self._on_evictions is not None:
                try:
                    self._on_evictions(evictions)
                except Exception:  # a listener's bug must not cost a request its statistics
                    log.exception("handling the chunk store's evictions failed")
            return
        self._received[str(message["request_id"])] = BlendStats.from_dict(message["stats"])

    def collect(self, request_id: str) -> BlendStats | None:
        """The statistics posted for ``request_id`` (removed), or None if it was not blended."""
        self.drain()
        return self._received.pop(request_id, None)

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._socket.fileno())
        self._socket.close()


class StatsOutbox:
    """The worker's side: ``post`` waits at most ``SEND_TIMEOUT_S`` and never raises."""

    def __init__(self, channel: str) -> None:
        self._address = _address(channel)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.settimeout(SEND_TIMEOUT_S)
        self._failing = False

    def post(self, request_id: str, stats: BlendStats) -> None:
        """Send ``stats`` under the front end's ``request_id``."""
        self._send({"request_id": request_id, "stats": stats.to_dict()})

    def post_evictions(self, evictions: StoreEvictions) -> None:
        """Send evictions that no request's statistics carry."""
        self._send({"evictions": evictions.to_dict()})

    def _send(self, message: dict) -> None:
        data = json.dumps(message).encode()
        try:
            self._socket.sendto(data, self._address)
        except OSError as exc:
            if not self._failing:
                log.warning("blend statistics are being lost: %s", exc)
            self._failing = True
            return
        self._failing = False

    def close(self) -> None:
        self._socket.close()
