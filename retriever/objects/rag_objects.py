"""OpenAI's retrieval objects over the library: files, vector stores and stored responses."""

from __future__ import annotations

from pathlib import Path

from retriever.file_store import FileStore
from retriever.object_db import ObjectDatabase
from retriever.pg_objects import PgObjectDatabase
from retriever.response_store import ResponseStore
from retriever.vector_store_db import VectorStoreDB


class RagObjects:
    """Opened after the library, on the same database: its SQLite file at `path`, or the shared
    PostgreSQL database at `database_url` (then every replica serves the same objects)."""

    def __init__(self, path: Path, database_url: str | None = None) -> None:
        self.database: ObjectDatabase | PgObjectDatabase = (
            ObjectDatabase(path) if database_url is None else PgObjectDatabase(database_url)
        )
        self.files = FileStore(self.database)
        self.vector_stores = VectorStoreDB(self.database)
        self.responses = ResponseStore(self.database)

    def close(self) -> None:
        self.database.close()
