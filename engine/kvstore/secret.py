"""The per-data-dir secret that keys chunk-KV checksums (see `mac.py`), kept in one small file.

The file holds 64 hex characters (32 random bytes) and a newline, mode 0600. It is created
atomically (a synced temp file hard-linked into place, so a crash leaves no half-written secret
and two servers starting at once agree on one) and reused after every restart, which keeps the
disk tier's entries valid.

A malformed secret file is an error, not silently replaced: the secret is the root of trust of
the on-disk cache, so a file this code did not write means an operator or another program put it
there. Replacing it would hide that, and where replicas share a secret on one volume it would
split them onto different secrets that reject and delete each other's entries. The error says how
to recover (delete the file; cached chunks are then recomputed).

Servers that share a Redis tier must sign with one secret: `RAGBLEND_CHUNK_CACHE_SECRET` (hex)
then replaces the file's (`chunk_kv_secret`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import uuid
from pathlib import Path

from engine.contract.settings import shared_secret
from engine.kvstore.atomic import fsync_directory

logger = logging.getLogger(__name__)

SECRET_BYTES = 32
_FILE_MODE = 0o600


class SecretFileError(RuntimeError):
    """The secret file exists but cannot be used; the message says why and how to recover."""


def chunk_kv_secret(path: str | os.PathLike[str], shared_hex: str = "") -> bytes:
    """The secret that signs chunk KV: `shared_hex` when set, else the data dir's secret file."""
    return shared_secret(shared_hex) if shared_hex else load_or_create_secret(path)


def load_or_create_secret(path: str | os.PathLike[str]) -> bytes:
    """The secret stored at `path`, creating the file (and its folder) on first use.

    Raises `SecretFileError` when the file is malformed or unreadable. Call once at start-up.
    """
    path = Path(path)
    if not path.exists():
        _create(path)
    return _read(path)


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(SECRET_BYTES) + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process created one meanwhile
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    fsync_directory(path.parent)


def _read(path: Path) -> bytes:
    recover = (
        "Delete it to have a new secret created at start-up; chunk KV already on disk will "
        "then be refused and recomputed."
    )
    try:
        mode = path.stat().st_mode
        text = path.read_bytes().decode("ascii", errors="replace").strip()
    except OSError as error:
        raise SecretFileError(f"cannot read the chunk-KV secret file {path}: {error}") from error
    if len(text) != 2 * SECRET_BYTES or not all(c in "0123456789abcdefABCDEF" for c in text):
        raise SecretFileError(
            f"the chunk-KV secret file {path} is malformed: it must hold exactly "
            f"{2 * SECRET_BYTES} hex characters. {recover}"
        )
    if stat.S_IMODE(mode) & 0o077:
        logger.warning(
            "the chunk-KV secret file %s can be read by other users; run chmod 600 on it", path
        )
    return bytes.fromhex(text)
