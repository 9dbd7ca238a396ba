"""Connections to the shared library's PostgreSQL database, and what an outage looks like.

Each block borrows a connection: an idle one that still answers, or a new one. Nothing retries in
the background, so a request during an outage fails at once (refused, or after
`CONNECT_TIMEOUT_S`) and the first one after the database is back succeeds. Every error that
means "the database cannot be reached" leaves here as `LibraryUnavailable`, which the gateway
answers with a 503; a transaction that fails is rolled back whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from retriever.db.pg_schema import ensure_schema
from retriever.library.interfaces import LibraryUnavailable

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 3
"""How long opening a connection may take before the database counts as unreachable."""
IDLE_CONNECTIONS = 8
"""Connections kept open between uses; more are opened while more threads need one."""


class PgDatabase:
    """`transaction()` to write (READ COMMITTED), `snapshot()` to read several statements that
    must agree (REPEATABLE READ), `reading()` for one-statement reads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._schema_ensured = False
        try:
            with self.reading():  # connect now: creates the tables, or tells the database is down
                pass
        except LibraryUnavailable as error:
            logger.warning("%s; the library opens once the database is reachable", error)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

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
            connection = self._borrow()
            try:
                yield connection
            finally:
                self._give_back(connection)
        except psycopg.OperationalError as error:
            raise LibraryUnavailable(f"document library unavailable: {_reason(error)}") from error

    def _borrow(self) -> psycopg.Connection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._connect()
            try:
                connection.execute("")  # still there after a database restart?
                return connection
            except psycopg.Error:
                connection.close()

    def _connect(self) -> psycopg.Connection:
        """A new connection; the first one to succeed makes sure the tables exist."""
        connection = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name="ragblend",
        )
        if not self._schema_ensured:
            try:
                with connection.transaction():
                    ensure_schema(connection)
            except BaseException:
                connection.close()
                raise
            self._schema_ensured = True
        return connection

    def _give_back(self, connection: psycopg.Connection) -> None:
        healthy = (
            not connection.closed
            and connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        )
        with self._lock:
            if healthy and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append(connection)
                return
        connection.close()


class QmarkConnection:
    """A connection that takes SQLite's `?` placeholders, for SQL both backends share (the
    document store, `retriever.library.kv_presence`, OpenAI's objects); `raw` is the driver's."""

    def __init__(self, connection: psycopg.Connection) -> None:
        self.raw = connection

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor:
        return self.raw.execute(sql.replace("?", "%s"), parameters)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor:
        cursor = self.raw.cursor()
        cursor.executemany(sql.replace("?", "%s"), rows)
        return cursor


class QmarkDatabase:
    """`PgDatabase` with the interface of `retriever.db.sqlite.ObjectDatabase`: `reading()`,
    `snapshot()` and `transaction()` yield a `QmarkConnection`, so SQL written once with `?`
    runs on either backend. With `write_lock`, every transaction first takes that advisory lock:
    SQL that reads, then writes, relying on SQLite's one writer at a time, stays right across
    replicas."""

    def __init__(self, database: PgDatabase, write_lock: int | None = None) -> None:
        self.database = database
        self._write_lock = write_lock

    def close(self) -> None:
        self.database.close()

    @contextmanager
    def reading(self) -> Iterator[QmarkConnection]:
        with self.database.reading() as connection:
            yield QmarkConnection(connection)

    @contextmanager
    def snapshot(self) -> Iterator[QmarkConnection]:
        with self.database.snapshot() as connection:
            yield QmarkConnection(connection)

    @contextmanager
    def transaction(self) -> Iterator[QmarkConnection]:
        """All-or-nothing, and with `write_lock` one at a time across every replica."""
        with self.database.transaction() as connection:
            if self._write_lock is not None:
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_lock,))
            yield QmarkConnection(connection)


def _reason(error: Exception) -> str:
    """The first line of the driver's message (the rest repeats connection details)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
