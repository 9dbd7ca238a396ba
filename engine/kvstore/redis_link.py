"""The Redis tier's connection: every call made through one place that turns failures into skips.

Redis may be down, slow or full at any moment. `RedisLink.call` runs one operation on the client
unless an outage is in progress (then it is skipped, counted "skipped"); a failure starts or
extends an outage (`OutageGuard`: one warning, growing waits between probes). A full Redis
refuses writes only, so writes have an outage of their own and reads go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from engine.kvstore.counters import Counters
from engine.kvstore.outage import OutageGuard

T = TypeVar("T")


class Skipped:
    """What a call returns when it was skipped or failed (an outage)."""


SKIPPED = Skipped()


class RedisLink:
    """One Redis client with its outage guards. ``errors`` is redis's base error class, which a
    caller catches around reads it makes on ``client`` directly (and reports with `failed`)."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        first_retry_s: float,
        counters: Counters,
        logger: logging.Logger,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as error:
            needed = "the Redis tier needs the `redis` package (scripts/install.sh installs it)"
            raise RuntimeError(needed) from error

        self.errors: type[Exception] = redis.RedisError
        self._full_errors = redis.exceptions.OutOfMemoryError
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),  # the guard retries, with backoff, not every call
        )
        self._counters = counters
        address = self.client.connection_pool.connection_kwargs  # no password: it is logged
        where = f"Redis chunk tier {address.get('path') or address.get('host')}"
        if "port" in address:
            where += f":{address['port']}"
        self._link = OutageGuard(where, logger, counters, first_retry_s=first_retry_s)
        self._full = OutageGuard(
            f"{where} refuses writes", logger, counters, first_retry_s=first_retry_s
        )

    def call(self, operation: Callable[[Any], T], *, write: bool = False) -> T | Skipped:
        """`operation(client)`, or SKIPPED during an outage or when it fails (counted)."""
        if not self._link.available() or (write and not self._full.available()):
            self._counters.add("skipped")
            return SKIPPED
        try:
            result = operation(self.client)
        except self._full_errors as error:
            self._link.succeeded()
            self._full.failed(error)
            return SKIPPED
        except self.errors as error:
            self._link.failed(error)
            return SKIPPED
        self._link.succeeded()
        if write:
            self._full.succeeded()
        return result

    def failed(self, error: Exception) -> None:
        """A direct read on ``client`` failed: an outage starts (or goes on)."""
        self._link.failed(error)

    def close(self) -> None:
        self.client.close()
