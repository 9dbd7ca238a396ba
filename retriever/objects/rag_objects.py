"""OpenAI's retrieval objects over the library: files, vector stores and stored responses.

`retriever.objects.file_store`, `vector_store_db` and `response_store` write portable SQL with
SQLite's `?` placeholders against `ObjectDatabase`; on the shared PostgreSQL database the same
SQL runs through `QmarkDatabase`. Their writes read, then write, relying on SQLite's one writer at
a time: there every write transaction takes one advisory lock first, which keeps that true across
replicas.
"""

from __future__ import annotations

import copy
from pathlib import Path

from retriever.db.postgres import PgDatabase, QmarkDatabase
from retriever.db.sqlite import ObjectDatabase
from retriever.objects.file_store import FileStore
from retriever.objects.response_store import ResponseStore
from retriever.objects.vector_store_db import VectorStoreDB
from retriever.tenant import Tenant

OBJECTS_WRITE_LOCK = 0x6F626A_65637473
"""Advisory lock key every write of OpenAI's objects on PostgreSQL takes first."""


class RagObjects:
    """Opened after the library, on the same database: its SQLite file at `path`, or the shared
    PostgreSQL database at `database_url` (then every replica serves the same objects).

    As opened it is no project's: it has no stores (reading one is an AttributeError), and
    `in_project` gives a tenant's, on the same database."""

    tenant: Tenant
    files: FileStore
    vector_stores: VectorStoreDB
    responses: ResponseStore

    def __init__(self, path: Path, database_url: str | None = None) -> None:
        self.database: ObjectDatabase | QmarkDatabase = (
            ObjectDatabase(path)
            if database_url is None
            else QmarkDatabase(PgDatabase(database_url), OBJECTS_WRITE_LOCK)
        )
        self._text_bytes = (
            "length(CAST(text AS BLOB))" if database_url is None else "octet_length(text)"
        )
        """UTF-8 bytes of a text column: SQLite before 3.43 has no octet_length."""

    def stored_by_project(self) -> dict[str, dict[str, int]]:
        """What each project stores: documents (their characters, and the UTF-8 bytes of the
        chunk text the library keeps for them, overlaps included), files (and their bytes),
        vector stores and responses; projects storing nothing are left out. The document bytes
        read every chunk's text: one pass over the library's text per call."""
        chunks = "documents JOIN chunks ON chunks.document_id = documents.id"
        counts = (
            ("documents", "count(*)", "documents"),
            ("document_chars", "sum(num_chars)", "documents"),
            ("document_bytes", f"sum({self._text_bytes})", chunks),
            ("files", "count(*)", "files"),
            ("file_bytes", "sum(bytes)", "files"),
            ("vector_stores", "count(*)", "vector_stores"),
            ("responses", "count(*)", "responses"),
        )
        stored: dict[str, dict[str, int]] = {}
        with self.database.reading() as connection:
            for name, total, table in counts:
                rows = connection.execute(
                    f"SELECT project, {total} FROM {table} GROUP BY project"
                ).fetchall()
                for project, value in rows:
                    stored.setdefault(project, dict.fromkeys([kind for kind, _, _ in counts], 0))
                    stored[project][name] = int(value or 0)
        return stored

    def in_project(self, tenant: Tenant) -> RagObjects:
        """The objects of `tenant`'s project, on this database (close only the one opened)."""
        view = copy.copy(self)
        view.tenant = tenant
        view.files = FileStore(self.database, tenant.project)
        view.vector_stores = VectorStoreDB(self.database, tenant.project)
        view.responses = ResponseStore(self.database, tenant.project)
        return view

    @property
    def project(self) -> str:
        """The project of the tenant these objects are (`in_project`)."""
        return self.tenant.project

    def close(self) -> None:
        self.database.close()
