"""Bound the work admitted: requests served at once (the rest get 429) and choices per request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from gateway.http.errors import APIError


class AdmissionGate:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0
        self._last_left = float("-inf")

    def busy(self, quiet_s: float = 0.0) -> bool:
        """Whether requests are being served, or one left less than ``quiet_s`` ago (clients
        that send one request after another leave gaps of milliseconds)."""
        return self.active > 0 or time.monotonic() - self._last_left < quiet_s

    def enter(self) -> None:
        if self.active >= self.limit:
            raise APIError(
                429,
                f"The server is at its limit of {self.limit} concurrent requests; retry shortly.",
                code="server_overloaded",
            )
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        self._last_left = time.monotonic()

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """`enter` for the block, `leave` after it."""
        self.enter()
        try:
            yield
        finally:
            self.leave()


def check_choice_count(prompts: int, n: int, limit: int) -> None:
    """Refuse a request asking for more than ``limit`` choices (prompts x n) with a 400."""
    if prompts * n > limit:
        raise APIError(
            400,
            f"This request asks for {prompts * n} choices ({prompts} prompts x n={n}); "
            f"the limit is {limit}.",
            param="n" if n > 1 else "prompt",
        )
