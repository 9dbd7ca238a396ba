"""Stored responses (``store: true``): the body ``GET /v1/responses/{id}`` returns, and the turn's
conversation, which a later request continues with ``previous_response_id``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from retriever.db.sqlite import ObjectDatabase


@dataclass(frozen=True)
class StoredResponse:
    id: str
    body: dict[str, Any]
    conversation: list[dict[str, str]]
    """The messages of that turn and all turns before it, its answer last (no instructions)."""


class ResponseStore:
    """One project's stored responses: another project's id is unknown here."""

    def __init__(self, database: ObjectDatabase, project: str) -> None:
        self.database = database
        self.project = project

    def save(self, stored: StoredResponse) -> None:
        with self.database.transaction() as connection:
            connection.execute(
                "INSERT INTO responses (id, body, conversation, created_at, project) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    stored.id,
                    json.dumps(stored.body, ensure_ascii=False),
                    json.dumps(stored.conversation, ensure_ascii=False),
                    int(time.time()),
                    self.project,
                ),
            )

    def get(self, response_id: str) -> StoredResponse | None:
        with self.database.reading() as connection:
            row = connection.execute(
                "SELECT body, conversation FROM responses WHERE id = ? AND project = ?",
                (response_id, self.project),
            ).fetchone()
        if row is None:
            return None
        return StoredResponse(response_id, json.loads(row[0]), json.loads(row[1]))

    def delete(self, response_id: str) -> bool:
        with self.database.transaction() as connection:
            deleted = connection.execute(
                "DELETE FROM responses WHERE id = ? AND project = ?", (response_id, self.project)
            )
        return deleted.rowcount == 1
