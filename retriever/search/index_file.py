"""On-disk form of a vector index: one NumPy .npz archive written atomically.

The archive holds the serialized FAISS index, its kind and the HNSW tombstones, so the index and
the list of removed ids can never be out of step on disk.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1


def write_index_file(path: Path, kind: str, serialized: np.ndarray, tombstones: np.ndarray) -> None:
    """Write to a temp file beside `path`, fsync it, rename it over `path`, fsync the folder."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as file:
            np.savez(
                file,
                format_version=np.array(FORMAT_VERSION),
                kind=np.array(kind),
                faiss_index=serialized,
                tombstones=tombstones,
            )
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    directory_descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_descriptor)
    finally:
        os.close(directory_descriptor)


def read_index_file(path: Path) -> tuple[str, np.ndarray, np.ndarray]:
    """(kind, serialized FAISS index as uint8, tombstone ids as int64) from `path`."""
    with np.load(path, allow_pickle=False) as archive:
        version = int(archive["format_version"])
        if version != FORMAT_VERSION:
            raise ValueError(f"{path} has index format {version}, expected {FORMAT_VERSION}")
        return str(archive["kind"]), archive["faiss_index"], archive["tombstones"]
