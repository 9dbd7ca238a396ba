"""Per-request blend statistics, handed from the worker to the scheduler over a datagram socket.

The worker posts a request's statistics before the forward pass that first computes it; the
scheduler collects them when the request finishes. vLLM's own worker -> scheduler channel
delivers them only after requests finishing in that same step were already reported, so a
one-token answer would lose them. The worker also posts them to the front end (the process
calling ``Engine.generate``, under the id it knows the request by): vLLM's front end ends a
request on a stop string itself and aborts it in the engine, so the finished output carries
no statistics from the scheduler. The socket lives in Linux's abstract namespace under a name
unique to one engine start: it exists exactly as long as the scheduler holds it, and no other
process can remove it (files could be, by a second server pointed at the same data dir).
Nothing here raises into the engine: a lost message is a request without statistics, logged.
"""

from __future__ import annotations

import json
import logging
import socket

from engine.contract import BlendStats

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 64 * 1024
MAX_UNCOLLECTED = 4096
"""Statistics of requests that never finish (should not happen) are dropped past this many."""


def _address(channel: str) -> str:
    if not channel:
        raise ValueError("the statistics channel needs a name")
    return f"\0ragblend-stats-{channel}"


def front_channel(channel: str) -> str:
    """The front end's channel next to the scheduler's ``channel``."""
    return f"{channel}-front"


class StatsInbox:
    """Receiving side (the scheduler, or the front end on its own channel): owns the socket;
    ``collect`` is called when a request finishes."""

    def __init__(self, channel: str) -> None:
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(_address(channel))
        self._socket.setblocking(False)
        self._received: dict[str, BlendStats] = {}

    def drain(self) -> None:
        """Read every message waiting (cheap when none); called each scheduler step."""
        while True:
            try:
                data = self._socket.recv(MAX_MESSAGE_BYTES)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("reading blend statistics failed: %s", exc)
                return
            try:
                message = json.loads(data)
                self._received[str(message["request_id"])] = BlendStats.from_dict(message["stats"])
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("dropping a malformed blend statistics message: %s", exc)
        while len(self._received) > MAX_UNCOLLECTED:
            del self._received[next(iter(self._received))]

    def collect(self, request_id: str) -> BlendStats | None:
        """The statistics posted for ``request_id`` (removed), or None if it was not blended."""
        self.drain()
        return self._received.pop(request_id, None)

    def close(self) -> None:
        self._socket.close()


class StatsOutbox:
    """Worker side: ``post`` sends without blocking and never raises."""

    def __init__(self, channel: str) -> None:
        self._scheduler = _address(channel)
        self._front = _address(front_channel(channel))
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)
        self._failing: set[str] = set()

    def post(self, request_id: str, stats: BlendStats, front_id: str = "") -> None:
        """To the scheduler under vLLM's ``request_id``; to the front end under ``front_id``
        too, when the request's plan names one."""
        self._send(self._scheduler, request_id, stats)
        if front_id:
            self._send(self._front, front_id, stats)

    def _send(self, address: str, request_id: str, stats: BlendStats) -> None:
        data = json.dumps({"request_id": request_id, "stats": stats.to_dict()}).encode()
        try:
            self._socket.sendto(data, address)
        except OSError as exc:
            if address not in self._failing:
                log.warning("blend statistics are being lost: %s", exc)
            self._failing.add(address)
            return
        self._failing.discard(address)

    def close(self) -> None:
        self._socket.close()
