"""Vector stores (named sets of uploaded files), their files and file batches, in SQLite.

Every change is one transaction: a store created with files, or a batch of files, is stored
whole or not at all (an unknown file id leaves nothing behind). The statements they are made of
are `retriever.objects.vector_store_queries`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from retriever.db.sqlite import ObjectDatabase
from retriever.library.records import metadata_json
from retriever.objects.cursor_pages import ListSource, PageRequest, select_page
from retriever.objects.vector_store_queries import (
    OWN_STORE,
    Attachment,
    attach_files,
    select_batch,
    select_store,
    select_store_file,
)
from retriever.objects.vector_store_records import (
    STORE_COLUMNS,
    STORE_FILE_COLUMNS,
    STORE_FILE_STATUS,
    STORE_FILES,
    BatchRecord,
    StoreFileRecord,
    VectorStoreRecord,
    in_marks,
    store_file_from_row,
    store_from_row,
)

_STORES = ListSource("vector_stores s", "s.seq", "s.id", "s.project = ?")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class VectorStoreDB:
    """One project's vector stores, their files and batches; another project's store is unknown
    here, and only the project's files can be attached."""

    def __init__(self, database: ObjectDatabase, project: str) -> None:
        self.database = database
        self.project = project

    def create(
        self,
        name: str,
        description: str | None,
        metadata: dict[str, str],
        expires_after_days: int | None,
        attachments: Sequence[Attachment],
    ) -> VectorStoreRecord:
        store_id, now = _new_id("vs"), int(time.time())
        with self.database.transaction() as connection:
            connection.execute(
                "INSERT INTO vector_stores (id, name, description, metadata, expires_after_days, "
                "created_at, last_active_at, project) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    store_id,
                    name,
                    description,
                    metadata_json(metadata),
                    expires_after_days,
                    now,
                    now,
                    self.project,
                ),
            )
            attach_files(connection, store_id, attachments, None, self.project)
            return select_store(connection, store_id, self.project)

    def get(self, store_id: str) -> VectorStoreRecord | None:
        with self.database.reading() as connection:
            return select_store(connection, store_id, self.project, required=False)

    def page(self, page: PageRequest) -> tuple[list[VectorStoreRecord], bool]:
        with self.database.reading() as connection:
            rows, has_more = select_page(connection, STORE_COLUMNS, _STORES, (self.project,), page)
        return [store_from_row(row) for row in rows], has_more

    def update(self, store_id: str, changes: dict[str, Any]) -> VectorStoreRecord | None:
        """Set ``name``, ``metadata`` and/or ``expires_after_days`` (None removes the expiry)."""
        values = {key: metadata_json(v) if key == "metadata" else v for key, v in changes.items()}
        with self.database.transaction() as connection:
            if select_store(connection, store_id, self.project, required=False) is None:
                return None
            for column, value in values.items():
                assert column in ("name", "metadata", "expires_after_days"), column
                connection.execute(
                    f"UPDATE vector_stores SET {column} = ? WHERE id = ?", (value, store_id)
                )
            return select_store(connection, store_id, self.project)

    def delete(self, store_id: str) -> bool:
        with self.database.transaction() as connection:
            deleted = connection.execute(
                "DELETE FROM vector_stores WHERE id = ? AND project = ?", (store_id, self.project)
            )
            return deleted.rowcount == 1

    def touch(self, store_ids: Sequence[str]) -> None:
        """Mark the stores used now (their expiry counts from their last use)."""
        with self.database.transaction() as connection:
            connection.executemany(
                "UPDATE vector_stores SET last_active_at = ? WHERE id = ? AND project = ?",
                [(int(time.time()), store_id, self.project) for store_id in store_ids],
            )

    def attach(self, store_id: str, attachments: Sequence[Attachment]) -> list[StoreFileRecord]:
        """Attach files (again: their attributes are replaced); all or none."""
        with self.database.transaction() as connection:
            select_store(connection, store_id, self.project)
            attach_files(connection, store_id, attachments, None, self.project)
            return [
                select_store_file(connection, store_id, a.file_id, self.project)
                for a in attachments
            ]

    def create_batch(self, store_id: str, attachments: Sequence[Attachment]) -> BatchRecord:
        batch_id = _new_id("vsfb")
        with self.database.transaction() as connection:
            select_store(connection, store_id, self.project)
            connection.execute(
                "INSERT INTO vector_store_file_batches (id, vector_store_id, created_at) "
                "VALUES (?, ?, ?)",
                (batch_id, store_id, int(time.time())),
            )
            attach_files(connection, store_id, attachments, batch_id, self.project)
            return select_batch(connection, store_id, batch_id, self.project)

    def get_batch(self, store_id: str, batch_id: str) -> BatchRecord | None:
        with self.database.reading() as connection:
            return select_batch(connection, store_id, batch_id, self.project)

    def get_file(self, store_id: str, file_id: str) -> StoreFileRecord | None:
        with self.database.reading() as connection:
            return select_store_file(connection, store_id, file_id, self.project)

    def page_files(
        self,
        store_id: str,
        page: PageRequest,
        status: str | None = None,
        batch_id: str | None = None,
    ) -> tuple[list[StoreFileRecord], bool]:
        scope, parameters = f"v.vector_store_id = ? AND {OWN_STORE}", (store_id, self.project)
        if status is not None:
            scope, parameters = f"{scope} AND {STORE_FILE_STATUS} = ?", (*parameters, status)
        if batch_id is not None:
            scope, parameters = f"{scope} AND v.batch_id = ?", (*parameters, batch_id)
        source = ListSource(STORE_FILES, "v.seq", "v.file_id", scope)
        with self.database.reading() as connection:
            rows, more = select_page(connection, STORE_FILE_COLUMNS, source, parameters, page)
        return [store_file_from_row(row) for row in rows], more

    def set_attributes(
        self, store_id: str, file_id: str, attributes: dict[str, Any]
    ) -> StoreFileRecord | None:
        with self.database.transaction() as connection:
            connection.execute(
                "UPDATE vector_store_files AS v SET attributes = ? "
                f"WHERE v.vector_store_id = ? AND v.file_id = ? AND {OWN_STORE}",
                (metadata_json(attributes), store_id, file_id, self.project),
            )
            return select_store_file(connection, store_id, file_id, self.project)

    def detach(self, store_id: str, file_id: str) -> bool:
        with self.database.transaction() as connection:
            detached = connection.execute(
                "DELETE FROM vector_store_files AS v "
                f"WHERE v.vector_store_id = ? AND v.file_id = ? AND {OWN_STORE}",
                (store_id, file_id, self.project),
            )
            return detached.rowcount == 1

    def searchable_files(self, store_ids: Sequence[str]) -> list[StoreFileRecord]:
        """The indexed files of the stores, in the order they were attached."""
        with self.database.reading() as connection:
            rows = connection.execute(
                f"SELECT {STORE_FILE_COLUMNS} FROM {STORE_FILES} "
                f"WHERE v.vector_store_id IN ({in_marks(store_ids)}) AND {OWN_STORE} "
                "AND d.status != 'pending' ORDER BY v.seq",
                (*store_ids, self.project),
            ).fetchall()
        return [store_file_from_row(row) for row in rows]
