"""Uploaded files (OpenAI's ``/v1/files``): each one's bytes, name, purpose and library document.

A file names its document as its project does; the row holds the id the library stores it under
(`retriever.library.document_ids`), which the foreign key to ``documents`` needs.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from retriever.db.sqlite import ObjectDatabase
from retriever.library.document_ids import client_id, stored_id
from retriever.objects.cursor_pages import ListSource, PageRequest, select_page

FILE_COLUMNS = "id, document_id, filename, purpose, bytes, created_at"


@dataclass(frozen=True)
class FileRecord:
    id: str
    document_id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex[:24]}"


class FileStore:
    """One project's files: another project's are not there for it (None, False, empty)."""

    def __init__(self, database: ObjectDatabase, project: str) -> None:
        self.database = database
        self.project = project

    def add(
        self,
        file_id: str,
        document_id: str,
        owns_document: bool,
        filename: str,
        purpose: str,
        content: bytes,
    ) -> FileRecord:
        """Store a file whose text is already the library document ``document_id``;
        ``owns_document``: its upload created that document."""
        record = FileRecord(file_id, document_id, filename, purpose, len(content), int(time.time()))
        with self.database.transaction() as connection:
            connection.execute(
                "INSERT INTO files (id, document_id, owns_document, filename, purpose, bytes, "
                "content, created_at, project) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    stored_id(document_id, self.project),
                    int(owns_document),
                    filename,
                    purpose,
                    record.bytes,
                    content,
                    record.created_at,
                    self.project,
                ),
            )
        return record

    def get(self, file_id: str) -> FileRecord | None:
        with self.database.reading() as connection:
            row = connection.execute(
                f"SELECT {FILE_COLUMNS} FROM files WHERE id = ? AND project = ?",
                (file_id, self.project),
            ).fetchone()
        return None if row is None else self._record(row)

    def content(self, file_id: str) -> bytes | None:
        with self.database.reading() as connection:
            row = connection.execute(
                "SELECT content FROM files WHERE id = ? AND project = ?", (file_id, self.project)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def page(self, page: PageRequest, purpose: str | None = None) -> tuple[list[FileRecord], bool]:
        source = ListSource("files", "seq", "id", "project = ?")
        parameters: tuple[str, ...] = (self.project,)
        if purpose is not None:
            source = ListSource("files", "seq", "id", "project = ? AND purpose = ?")
            parameters = (self.project, purpose)
        with self.database.reading() as connection:
            rows, has_more = select_page(connection, FILE_COLUMNS, source, parameters, page)
        return [self._record(row) for row in rows], has_more

    def delete(self, file_id: str) -> tuple[bool, str | None]:
        """Delete a file (and detach it from every vector store). Returns whether it existed, and
        the document to delete with it (see `_leave`)."""
        with self.database.transaction() as connection:
            row = connection.execute(
                "DELETE FROM files WHERE id = ? AND project = ? RETURNING document_id, "
                "owns_document",
                (file_id, self.project),
            ).fetchone()
            if row is None:
                return False, None
            return True, self._client_id(_leave(connection, *row))

    def vector_stores_of(self, file_id: str) -> list[str]:
        """The vector stores the file is attached to."""
        with self.database.reading() as connection:
            rows = connection.execute(
                "SELECT vector_store_id FROM vector_store_files WHERE file_id = ? ORDER BY seq",
                (file_id,),
            ).fetchall()
        return [row[0] for row in rows]

    def move_to_document(self, file_id: str, document_id: str, owns_document: bool) -> str | None:
        """Make the file's text the document ``document_id`` (the same text chunked another way);
        ``owns_document``: this move created it. Returns the document to delete, as `delete`."""
        document_id = stored_id(document_id, self.project)
        with self.database.transaction() as connection:
            row = connection.execute(
                "SELECT document_id, owns_document FROM files WHERE id = ? AND project = ?",
                (file_id, self.project),
            ).fetchone()
            if row is None or row[0] == document_id:
                return None
            connection.execute(
                "UPDATE files SET document_id = ?, owns_document = ? WHERE id = ?",
                (document_id, int(owns_document), file_id),
            )
            return self._client_id(_leave(connection, *row))

    def _record(self, row: tuple[Any, ...]) -> FileRecord:
        """A file from a row selected as FILE_COLUMNS, its document named as the project does."""
        file_id, document_id, *rest = row
        return FileRecord(file_id, client_id(document_id, self.project), *rest)

    def _client_id(self, document_id: str | None) -> str | None:
        return None if document_id is None else client_id(document_id, self.project)


def _leave(connection: Any, document_id: str, owned: int) -> str | None:
    """A file no longer uses ``document_id``: the document to delete, when the file's upload (or
    move) created it and no other file uses that text; another file using it takes it over."""
    if not owned:
        return None
    heir = connection.execute(
        "SELECT seq FROM files WHERE document_id = ? ORDER BY seq LIMIT 1", (document_id,)
    ).fetchone()
    if heir is None:
        return document_id
    connection.execute("UPDATE files SET owns_document = 1 WHERE seq = ?", heir)
    return None
