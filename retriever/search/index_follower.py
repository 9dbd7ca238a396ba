"""A replica's in-memory vector index, kept in step with the shared library's change log.

On start (and whenever the log was trimmed past what was applied) the index is built from one
snapshot: every chunk's stored embedding and the seq of the last change, read in one REPEATABLE
READ transaction. After that a background thread replays new changes in seq order every
`poll_s`; each change is one index call, so a search sees a whole change or none of it. The
replica that writes a change replays it right after its commit (`catch_up`), so its own writes
are searchable as soon as the write returns. While the database is down the thread logs once
and keeps retrying; it resumes from the last change it applied.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import numpy as np
import psycopg

from retriever.db.postgres import PgDatabase
from retriever.library import changelog
from retriever.library.interfaces import LibraryUnavailable, OutageLog
from retriever.search.index import IndexKind, VectorIndex

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.25
CHANGES_PER_READ = 500
LOG_RETENTION = timedelta(hours=24)
"""Changes older than this are trimmed; a replica away longer rebuilds its index on return."""
TRIM_EVERY_S = 600.0


class IndexFollower:
    """Owns `index`; `catch_up()` applies what was committed since the last call."""

    def __init__(
        self, database: PgDatabase, kind: IndexKind, dim: int, poll_s: float = POLL_SECONDS
    ) -> None:
        self._db = database
        self.kind: IndexKind = kind
        self.dim = dim
        self.poll_s = poll_s
        self.index = VectorIndex(dim, kind)
        self.last_applied: int | None = None
        """The seq of the last change in `index`; None until the first snapshot."""
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = OutageLog(logger, "following the document library")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="index-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def catch_up(self) -> None:
        """Apply every change committed so far (rebuild first if needed); raises
        `LibraryUnavailable` when the database cannot be reached."""
        with self._lock:
            while True:
                with self._db.snapshot() as connection:
                    if self._must_rebuild(connection):
                        self._rebuild(connection)
                    changes = changelog.changes_after(
                        connection, self.last_applied or 0, CHANGES_PER_READ
                    )
                    added = [
                        chunk_id
                        for change in changes
                        if change.kind == "add"
                        for chunk_id in change.chunk_ids
                    ]
                    vectors = changelog.vectors_of(connection, added) if added else {}
                for change in changes:
                    self._apply(change, vectors)
                if len(changes) < CHANGES_PER_READ:
                    return

    def _must_rebuild(self, connection: psycopg.Connection) -> bool:
        """First start, changes trimmed before this replica applied them, or a database that
        went back in time (restored from a backup)."""
        if self.last_applied is None:
            return True
        return not changelog.floor(connection) <= self.last_applied <= changelog.latest(connection)

    def _rebuild(self, connection: psycopg.Connection) -> None:
        latest = changelog.latest(connection)
        fresh = VectorIndex(self.dim, self.kind)
        for chunk_ids, vectors in changelog.all_vectors(connection):
            fresh.add(chunk_ids, vectors)
        self.index, self.last_applied = fresh, latest
        logger.info("vector index built from the shared library: %d chunks", len(fresh))

    def _apply(self, change: changelog.Change, vectors: dict[int, np.ndarray]) -> None:
        if change.kind == "delete":
            self.index.remove(change.chunk_ids)
        else:
            present = self.index.ids()
            ids = [c for c in change.chunk_ids if c in vectors and c not in present]
            if ids:
                self.index.add(ids, np.stack([vectors[c] for c in ids]))
        self.last_applied = change.seq

    def _run(self) -> None:
        since_trim = 0.0
        while not self._stopped.wait(self.poll_s):
            since_trim += self.poll_s
            try:
                self.catch_up()
                if since_trim >= TRIM_EVERY_S:
                    since_trim = 0.0
                    with self._db.transaction() as connection:
                        changelog.trim(connection, LOG_RETENTION)
            except LibraryUnavailable as error:
                self._outage.failed(error)
                continue
            except Exception:
                logger.exception("could not follow the document library; retrying")
                continue
            self._outage.succeeded()
