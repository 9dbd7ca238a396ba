"""One data directory, one server: an exclusive lock taken before anything in it is opened.

Two servers on one data dir would share a SQLite file, a FAISS index and a chunk store behind
each other's backs. The lock is an ``flock`` on ``<data_dir>/ragblend.lock``; the kernel drops
it when the holder exits, however it exits, so a crashed server never leaves a stale lock. The
file records who holds it, for the error the next server prints.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

LOCK_NAME = "ragblend.lock"


class DataDirInUse(RuntimeError):
    def __init__(self, data_dir: Path, holder: dict[str, Any]) -> None:
        who = f"pid {holder.get('pid', '?')}, port {holder.get('port', '?')}"
        super().__init__(
            f"the data directory {data_dir} is in use by another ragblend server ({who}); "
            "stop that server or set RAGBLEND_DATA_DIR to another folder"
        )
        self.holder = holder


class DataDirLock:
    """Held from ``acquire`` until ``release`` or the end of the process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self, port: int) -> None:
        """Take the lock or raise ``DataDirInUse`` naming the holder."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            handle.close()
            raise DataDirInUse(self.data_dir, holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "port": port}))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _read_holder(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}
