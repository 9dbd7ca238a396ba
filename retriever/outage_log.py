"""One log line when the shared library's database becomes unreachable and one when it is back,
for background loops that retry every few seconds and must not fill the log meanwhile."""

from __future__ import annotations

import logging


class OutageLog:
    """`failed(error)` on every failed attempt, `succeeded()` on every good one."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.down = False

    def failed(self, error: BaseException) -> None:
        if not self.down:
            self.down = True
            self.logger.warning("%s paused, retrying until it is back: %s", self.what, error)

    def succeeded(self) -> None:
        if self.down:
            self.down = False
            self.logger.warning("%s resumed: the document library is reachable again", self.what)
