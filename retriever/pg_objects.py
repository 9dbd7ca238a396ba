"""OpenAI's files, vector stores and stored responses in the shared PostgreSQL database, so every
replica serves the same ones.

`retriever.file_store`, `vector_store_db` and `response_store` write portable SQL with SQLite's
`?` placeholders against `ObjectDatabase`; this is the same interface over PostgreSQL. Their
writes read, then write, relying on SQLite's one writer at a time: here every write transaction
takes one advisory lock first, which keeps that true across replicas.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from retriever.pg_database import PgDatabase, QmarkConnection

OBJECTS_WRITE_LOCK = 0x6F626A_65637473
"""Advisory lock key every write of OpenAI's objects takes first."""


class PgObjectDatabase:
    """`transaction()` to write, `reading()` to read; both yield a `QmarkConnection`."""

    def __init__(self, url: str) -> None:
        self._db = PgDatabase(url)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def reading(self) -> Iterator[QmarkConnection]:
        with self._db.reading() as connection:
            yield QmarkConnection(connection)

    @contextmanager
    def transaction(self) -> Iterator[QmarkConnection]:
        """All-or-nothing, and one at a time across every replica."""
        with self._db.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (OBJECTS_WRITE_LOCK,))
            yield QmarkConnection(connection)
