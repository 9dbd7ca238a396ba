"""Crash-safe file writes: fill and fsync a hidden temp file, then rename it into place."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"


def write_synced_temp(directory: Path, stem: str, write: Callable[[BinaryIO], object]) -> Path:
    """Create a hidden temp file in `directory`, fill it with `write`, fsync it; return its path.

    The caller renames it into place with `os.replace` (atomic on POSIX) and then calls
    `fsync_directory`. On failure the temp file is removed and the error re-raised.
    """
    temp = directory / f".{stem}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
    try:
        with open(temp, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def fsync_directory(directory: Path) -> None:
    """Make renames inside `directory` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def remove_temp_files(directory: Path) -> None:
    """Delete temp files a crashed writer left behind."""
    for temp in directory.glob(f".*{TEMP_SUFFIX}"):
        temp.unlink(missing_ok=True)
