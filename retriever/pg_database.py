"""Connections to the shared library's PostgreSQL database, and what an outage looks like.

A small pool per replica: each block borrows one connection, checked before it is handed out, so
connections broken by a database restart are replaced instead of failing a request. Every error
that means "the database cannot be reached" (refused, dropped, timed out) leaves here as
`LibraryUnavailable`, which the gateway answers with a 503; a transaction that fails is rolled
back whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from retriever.library_store import LibraryUnavailable
from retriever.pg_schema import ensure_schema

CONNECT_TIMEOUT_S = 3
"""How long opening a connection may take before the database counts as unreachable."""
WAIT_TIMEOUT_S = 5.0
"""How long a caller waits for a connection from the pool before the same verdict."""
POOL_SIZE = 4


class PgDatabase:
    """`transaction()` to write (READ COMMITTED), `snapshot()` to read several statements that
    must agree (REPEATABLE READ), `reading()` for one-statement reads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            timeout=WAIT_TIMEOUT_S,
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT_S,
                "application_name": "ragblend",
            },
            check=ConnectionPool.check_connection,
            open=False,
            name="ragblend-library",
        )
        self._pool.open(wait=False)
        with self.transaction() as connection:
            ensure_schema(connection)

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """All-or-nothing: any exception rolls back every statement of the block."""
        with self._connection() as connection, connection.transaction():
            yield connection

    @contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection]:
        """One consistent view of the database for the whole block (read only)."""
        with self._connection() as connection:
            connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield connection
            finally:
                connection.execute("ROLLBACK")

    @contextmanager
    def reading(self) -> Iterator[psycopg.Connection]:
        with self._connection() as connection:
            yield connection

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        try:
            with self._pool.connection() as connection:
                yield connection
        except (psycopg.OperationalError, PoolTimeout) as error:
            raise LibraryUnavailable(f"document library unavailable: {_reason(error)}") from error


class QmarkConnection:
    """A connection that takes SQLite's `?` placeholders, for SQL both backends share
    (`retriever.kv_presence`)."""

    def __init__(self, connection: psycopg.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor:
        return self._connection.execute(sql.replace("?", "%s"), parameters)


def _reason(error: Exception) -> str:
    """The first line of the driver's message (the rest repeats connection details)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
