"""OpenAI's retrieval objects over the library: files, vector stores and stored responses."""

from __future__ import annotations

from pathlib import Path

from retriever.file_store import FileStore
from retriever.object_db import ObjectDatabase
from retriever.response_store import ResponseStore
from retriever.vector_store_db import VectorStoreDB


class RagObjects:
    """Opened on the library's database file (``Library.store.path``), after the library."""

    def __init__(self, path: Path) -> None:
        self.database = ObjectDatabase(path)
        self.files = FileStore(self.database)
        self.vector_stores = VectorStoreDB(self.database)
        self.responses = ResponseStore(self.database)

    def close(self) -> None:
        self.database.close()
