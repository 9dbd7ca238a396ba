"""The scheduler asks the worker's chunk store which of a request's chunks it holds.

A request none of whose chunks is stored (a first sighting) is best left to vLLM: its own
prefill is the fastest exact computation there is, and the worker copies the chunks out of the
paged cache afterwards (:mod:`engine.connector.capture`). Only the worker knows what is stored,
and the scheduler must decide before it claims anything, so the worker (rank 0) answers over a
Unix socket in Linux's abstract namespace, named for this engine start like the statistics
channel. One question, one answer, a few hundred microseconds; an answer that does not come
within ``TIMEOUT_S`` counts as "unknown", and the request is claimed and blended as before.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)
TIMEOUT_S = 0.05
LENGTH = struct.Struct("<I")
Answer = Callable[[str, list[list[int]]], list[bool]]
"""What the worker answers: for a KV salt and each chunk's token ids, whether it is stored."""


def _address(channel: str) -> str:
    if not channel:
        raise ValueError("the chunk lookup needs a channel name")
    return f"\0ragblend-lookup-{channel}"


def _send(sock: socket.socket, body: object) -> None:
    data = json.dumps(body).encode()
    sock.sendall(LENGTH.pack(len(data)) + data)


def _receive(sock: socket.socket) -> Any:
    (length,) = LENGTH.unpack(_exactly(sock, LENGTH.size))
    return json.loads(_exactly(sock, length))


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        part = sock.recv(count - len(data))
        if not part:
            raise ConnectionError("the other side closed the lookup channel")
        data += part
    return data


class ChunkLookupServer:
    """The worker's side: answers on a daemon thread per connection until closed."""

    def __init__(self, channel: str, answer: Answer, can_capture: bool) -> None:
        """``can_capture``: whether this worker copies first sightings out of the paged cache
        (told with every answer; a scheduler claims every request of a worker that cannot)."""
        self._answer, self._can_capture = answer, can_capture
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(_address(channel))
        self._socket.listen(4)
        threading.Thread(target=self._accept, name="chunk-lookup", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            while True:
                try:
                    question = _receive(connection)
                except (ConnectionError, OSError, ValueError):
                    return
                try:
                    stored = self._answer(str(question["salt"]), question["chunks"])
                except Exception:
                    log.exception("answering a chunk lookup failed")
                    return
                try:
                    _send(connection, {"stored": stored, "capture": self._can_capture})
                except OSError:
                    return  # the scheduler stopped waiting and hung up

    def close(self) -> None:
        self._socket.close()


class ChunkLookupClient:
    """The scheduler's side: ``stored`` blocks for at most ``timeout_s``."""

    def __init__(self, channel: str, timeout_s: float = TIMEOUT_S) -> None:
        self._address = _address(channel)
        self._timeout_s = timeout_s
        self._socket: socket.socket | None = None

    def stored(self, salt: str, chunks: Sequence[Sequence[int]]) -> tuple[list[bool], bool] | None:
        """Whether each chunk is stored, and whether the worker copies first sightings out of
        the paged cache; None when the worker did not answer in time (asked again next time)."""
        try:
            sock = self._connected()
            _send(sock, {"salt": salt, "chunks": [list(chunk) for chunk in chunks]})
            answer = _receive(sock)
            return [bool(found) for found in answer["stored"]], bool(answer["capture"])
        except Exception as exc:
            log.debug("no chunk lookup answer: %s", exc)
            self.close()
            return None

    def _connected(self) -> socket.socket:
        if self._socket is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self._timeout_s)
            sock.connect(self._address)
            self._socket = sock
        return self._socket

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
