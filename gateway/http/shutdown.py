"""Stop with a deadline: on SIGTERM the server first drains kept-alive connections (every response
says ``Connection: close``, ``/health`` says it is stopping), then stops accepting connections and
lets open requests finish until ``RAGBLEND_SHUTDOWN_TIMEOUT`` (counted from the signal); just
before it, open streams end with an error event and ``[DONE]``, waiting requests get a 503, and
their generations are aborted.

uvicorn alone would close idle kept-alive connections at once, under a request a client may be
sending on one (it sees the server disconnect without a response), and would cancel open requests
mid-response at the timeout, so a stream would be cut with no error. ``GracefulServer`` tells the
app when the signal arrives and holds uvicorn's own stop for the drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from types import FrameType
from typing import TypeVar

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.errors import APIError

log = logging.getLogger(__name__)

T = TypeVar("T")

MARGIN_SECONDS = 1.0
"""Streams end this long (or a quarter of the timeout, if less) before uvicorn's own deadline,
leaving time to send their last events."""

DRAIN_SECONDS = 6.0
"""After the signal the server keeps its connections this long (or half the timeout, if less),
answering with ``Connection: close``: a client sending on a kept-alive connection is told to
reconnect (elsewhere, behind a balancer) rather than finding the connection closed under it.
Longer than clients' own idle expiry (httpx: 5 s), so that a connection still idle when the drain
ends, and uvicorn closes it, is one its client has stopped using."""

QUIET_SECONDS = 1.0
"""The drain ends sooner once no connection has been open for this long: no client can be sending
on one (a stop with no client attached took 4 s longer). Behind a balancer that still routes
connections here, each keeps the drain going; Kubernetes takes the pod out of the endpoints before
the signal (the chart's preStop)."""
POLL_SECONDS = 0.1


class Shutdown:
    """The server's stop: ``begin`` on the signal, ``deadline`` set when open work must end."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline = asyncio.Event()
        self.begun = False

    @property
    def grace_s(self) -> float:
        return max(0.0, self.timeout_s - min(MARGIN_SECONDS, self.timeout_s / 4))

    @property
    def drain_s(self) -> float:
        return min(DRAIN_SECONDS, self.timeout_s / 2)

    def begin(self) -> None:
        """Start the countdown; call on the event loop (the first call counts)."""
        if self.begun:
            return
        self.begun = True
        log.info("shutting down: open requests have %.1f s to finish", self.grace_s)
        asyncio.get_running_loop().call_later(self.grace_s, self.deadline.set)

    @staticmethod
    def error() -> APIError:
        return APIError(
            503, "The server is shutting down; retry the request.", code="server_shutting_down"
        )


async def until_deadline(
    items: AsyncGenerator[T, None], deadline: asyncio.Event
) -> AsyncGenerator[T, None]:
    """``items`` until they end, or until ``deadline`` is set: then the shutdown error is raised.

    However this ends, ``items`` is closed (a generation is aborted): a pending step is cancelled,
    which closes the generator from inside, without waiting, so a cancelled caller cannot skip it.
    """
    waiter = asyncio.ensure_future(deadline.wait())
    step: asyncio.Future[T] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(items))
            await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                raise Shutdown.error()
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        waiter.cancel()
        if step is not None and not step.done():
            step.cancel()
        else:
            await items.aclose()


class CloseConnectionsWhenStopping:
    """ASGI middleware: once the shutdown has begun, every response carries ``Connection: close``
    (uvicorn then closes the connection after it, and the client opens a new one)."""

    def __init__(self, app: ASGIApp, shutdown: Shutdown) -> None:
        self.app = app
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and self.shutdown.begun:
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_closing)


class GracefulServer(uvicorn.Server):
    """uvicorn's server: a stop signal begins the app's ``Shutdown`` at once and uvicorn's own
    stop (no new connections, idle ones closed) after the drain, which ends early once no
    connection has been open for ``QUIET_SECONDS``. A second signal skips the rest of the drain;
    a third SIGINT forces the exit, as in uvicorn."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        config.timeout_graceful_shutdown = shutdown.timeout_s - shutdown.drain_s
        super().__init__(config)
        self.shutdown_of_app = shutdown
        self.loop: asyncio.AbstractEventLoop | None = None
        self.draining = False
        self.end_of_drain: asyncio.TimerHandle | None = None

    def run(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        """uvicorn's run, ending quietly after Ctrl-C. Once stopped gracefully uvicorn raises the
        signal that stopped it again, for its default action: for SIGTERM the process ends by the
        signal, as a supervisor expects; for SIGINT it is a KeyboardInterrupt, which `uvicorn.run`
        swallows and a bare `Server.run` lets end the program in a traceback."""
        with contextlib.suppress(KeyboardInterrupt):
            super().run(sockets)

    async def serve(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.loop is None or self.draining:
            if self.end_of_drain is not None:
                self.end_of_drain.cancel()
            super().handle_exit(sig, frame)
            return
        self.draining = True
        self.loop.call_soon_threadsafe(self._drain_then_exit, sig)

    def _drain_then_exit(self, sig: int) -> None:
        self.shutdown_of_app.begin()
        if not self.should_exit:  # no second signal came meanwhile
            loop = asyncio.get_running_loop()
            self._follow_drain(sig, loop.time() + self.shutdown_of_app.drain_s, None)

    def _follow_drain(self, sig: int, ends_at: float, quiet_since: float | None) -> None:
        """End the drain at ``ends_at`` or once no connection was open for ``QUIET_SECONDS``;
        until then look again every ``POLL_SECONDS``."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.server_state.connections:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        if now >= ends_at or (quiet_since is not None and now - quiet_since >= QUIET_SECONDS):
            super().handle_exit(sig, None)
            return
        self.end_of_drain = loop.call_later(
            POLL_SECONDS, self._follow_drain, sig, ends_at, quiet_since
        )
