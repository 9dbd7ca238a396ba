"""Write the embedded library's vector index file in the background, at most every few seconds.

The index file is a copy of the whole index, so writing it after every ingest made a stream of
small ingests (one `/v1/files` upload each) cost as much file writing as the index is large,
per upload: quadratic in the library. The document store is the source of truth and the index
is rebuilt from it whenever the file lags behind (`retriever.library.reconcile`), so the file
may lag: after a crash, the chunks of the last seconds are embedded again when the library
opens. Nothing acknowledged is lost. A failed write is logged and retried with the next change.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from retriever.search.index import VectorIndex

log = logging.getLogger(__name__)
SAVE_INTERVAL_S = 5.0
"""Least time between two writes of the index file."""


class IndexSaver:
    """Saves `index` to `path` within `interval_s` of `changed()`, from a thread of its own;
    `close()` writes what is left."""

    def __init__(self, index: VectorIndex, path: Path, interval_s: float = SAVE_INTERVAL_S) -> None:
        self.index = index
        self.path = path
        self.interval_s = interval_s
        self._unsaved = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="index-saver", daemon=True)
        self._thread.start()

    def changed(self) -> None:
        """The index changed: write it within `interval_s`."""
        self._unsaved.set()

    def close(self) -> None:
        """Stop the thread, writing the index first if it changed since the last write."""
        self._closing.set()
        self._thread.join()
        if self._unsaved.is_set():
            self._save()

    def _run(self) -> None:
        while not self._closing.wait(self.interval_s):
            if self._unsaved.is_set():
                self._save()

    def _save(self) -> None:
        self._unsaved.clear()  # a change during the write marks it again
        try:
            self.index.save(self.path)
        except Exception:
            log.exception("could not write %s; the next round tries again", self.path)
            self._unsaved.set()
