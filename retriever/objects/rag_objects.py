"""OpenAI's retrieval objects over the library: files, vector stores and stored responses.

`retriever.objects.file_store`, `vector_store_db` and `response_store` write portable SQL with
SQLite's `?` placeholders against `ObjectDatabase`; on the shared PostgreSQL database the same
SQL runs through `QmarkDatabase`. Their writes read, then write, relying on SQLite's one writer at
a time: there every write transaction takes one advisory lock first, which keeps that true across
replicas.
"""

from __future__ import annotations

from pathlib import Path

from retriever.db.postgres import PgDatabase, QmarkDatabase
from retriever.db.sqlite import ObjectDatabase
from retriever.objects.file_store import FileStore
from retriever.objects.response_store import ResponseStore
from retriever.objects.vector_store_db import VectorStoreDB

OBJECTS_WRITE_LOCK = 0x6F626A_65637473
"""Advisory lock key every write of OpenAI's objects on PostgreSQL takes first."""


class RagObjects:
    """Opened after the library, on the same database: its SQLite file at `path`, or the shared
    PostgreSQL database at `database_url` (then every replica serves the same objects)."""

    def __init__(self, path: Path, database_url: str | None = None) -> None:
        self.database: ObjectDatabase | QmarkDatabase = (
            ObjectDatabase(path)
            if database_url is None
            else QmarkDatabase(PgDatabase(database_url), OBJECTS_WRITE_LOCK)
        )
        self.files = FileStore(self.database)
        self.vector_stores = VectorStoreDB(self.database)
        self.responses = ResponseStore(self.database)

    def close(self) -> None:
        self.database.close()
