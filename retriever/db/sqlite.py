"""One connection to the library's database for OpenAI's files, vector stores and responses.

It is a second connection beside the document store's (SQLite in WAL mode serializes the writers),
so these objects never hold up document ingest, and every change of them is one transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retriever.db.sqlite_schema import open_database


class ObjectDatabase:
    """Serialized access to one connection: ``transaction()`` to write, ``reading()`` to read."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._connection = open_database(self.path)
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connection

    snapshot = reading
    """Several reads that must agree: the lock keeps out every write of this process."""

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All-or-nothing: any exception rolls back every statement of the block."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")
