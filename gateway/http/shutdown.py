"""Stop with a deadline: on SIGTERM the server stops accepting connections and lets open requests
finish until ``RAGBLEND_SHUTDOWN_TIMEOUT``; just before it, open streams end with an error event and
``[DONE]``, waiting requests get a 503, and their generations are aborted.

uvicorn alone would wait for the requests and then cancel them mid-response at the timeout, so a
stream would be cut with no error; ``GracefulServer`` tells the app when the signal arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from types import FrameType
from typing import TypeVar

import uvicorn

from gateway.http.errors import APIError

log = logging.getLogger(__name__)

T = TypeVar("T")

MARGIN_SECONDS = 1.0
"""Streams end this long (or a quarter of the timeout, if less) before uvicorn's own deadline,
leaving time to send their last events."""


class Shutdown:
    """The server's stop: ``begin`` on the signal, ``deadline`` set when open work must end."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline = asyncio.Event()
        self.begun = False

    @property
    def grace_s(self) -> float:
        return max(0.0, self.timeout_s - min(MARGIN_SECONDS, self.timeout_s / 4))

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


class GracefulServer(uvicorn.Server):
    """uvicorn's server, which also begins the app's ``Shutdown`` when a stop signal arrives."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        super().__init__(config)
        self.shutdown_of_app = shutdown
        self.loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.shutdown_of_app.begin)
        super().handle_exit(sig, frame)
