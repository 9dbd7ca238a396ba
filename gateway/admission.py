"""Bound the requests served at once; the rest are refused at the door with 429."""

from __future__ import annotations

from gateway.errors import APIError


class AdmissionGate:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

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
