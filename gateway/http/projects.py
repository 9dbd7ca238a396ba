"""Who a request is: the project its API key belongs to, and whether that key is an admin's.

``RAGBLEND_API_KEYS`` (and, one entry a line, ``RAGBLEND_API_KEYS_FILE``) hold entries ``key``,
``key:project`` or ``key:project:admin``; a bare key belongs to the ``default`` project, so the
format from before projects keeps its meaning. Every stored object belongs to one project and a
key sees only its own project's (`retriever` scopes each query). With no keys at all,
authentication is off and every request is ``default``. A caller's project resolves, once a
request, into its `Tenant` (`resolve_tenant`): the project with the salt of its cached KV, which
every call below the gateway takes.

The key file is read again when its modification time changes (checked at most once a request)
and on SIGHUP, so keys rotate without a restart. A file that no longer parses keeps the keys
read before, with an error in the log, rather than locking everyone out.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from gateway.callers import ANONYMOUS, Caller, parse_entries
from retriever import DEFAULT_PROJECT, Tenant

log = logging.getLogger(__name__)


def read_key_file(path: Path) -> dict[str, Caller]:
    """The entries of a key file, one a line; OSError and ValueError (naming the file) raise."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return parse_entries(lines, f"RAGBLEND_API_KEYS_FILE ({path})")


class KeyRing:
    """The keys in force: the settings' entries and the key file's, the file's kept current."""

    def __init__(self, entries: Mapping[str, Caller], file: Path | None) -> None:
        self._fixed = dict(entries)
        self._file = file
        self._lock = threading.Lock()
        self._file_mtime: int | None = None
        self._from_file: dict[str, Caller] = {}
        if file is not None:
            self._file_mtime = os.stat(file).st_mtime_ns
            self._from_file = read_key_file(file)
        self._check_overlap(self._from_file)

    @property
    def projects(self) -> list[str]:
        """The projects keys name now (``default`` when authentication is off), sorted."""
        callers = {**self._fixed, **self._current()}.values()
        return sorted({caller.project for caller in callers} or {DEFAULT_PROJECT})

    def caller(self, headers: Iterable[tuple[bytes, bytes]]) -> Caller | None:
        """The caller whose key ASGI ``headers`` carry as ``Authorization: Bearer <key>``; None
        when they carry no key. Keys are compared as bytes in constant time, so any header value
        (non-ASCII included) is just wrong."""
        keys = {**self._fixed, **self._current()}
        if not keys:
            return ANONYMOUS
        token = bearer_token(headers)
        if token is None:
            return None
        found = None
        for key, caller in keys.items():
            if hmac.compare_digest(token, key.encode("utf-8")):
                found = caller
        return found

    def reload(self) -> None:
        """Read the key file again now (SIGHUP)."""
        self._refresh(force=True)

    def _current(self) -> dict[str, Caller]:
        self._refresh(force=False)
        return self._from_file

    def _refresh(self, force: bool) -> None:
        if self._file is None:
            return
        with self._lock:
            try:
                mtime = os.stat(self._file).st_mtime_ns
                if not force and mtime == self._file_mtime:
                    return
                entries = read_key_file(self._file)
                self._check_overlap(entries)
            except (OSError, ValueError) as error:
                log.error("keeping the API keys read before: %s", error)
                return
            self._file_mtime, self._from_file = mtime, entries
            log.info("read %d API keys from %s", len(entries), self._file)

    def _check_overlap(self, from_file: Mapping[str, Caller]) -> None:
        clash = [key for key, caller in from_file.items() if self._fixed.get(key, caller) != caller]
        if clash:
            raise ValueError(
                f"RAGBLEND_API_KEYS_FILE gives {len(clash)} key(s) of RAGBLEND_API_KEYS another "
                "project or role"
            )


def resolve_tenant(project: str, shared: Collection[str]) -> Tenant:
    """`project` with the salt of its chunk KV and prefix-cache entries, the one place that
    salt is derived: its name, so that no project hits, or can time, another's cached text;
    empty for the projects in `shared`, which hit one another's (and so can tell what the others
    sent: the timing side channel they accept)."""
    return Tenant(project, "" if project in shared else project)


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of ``Authorization: Bearer <token>`` in ASGI ``headers``; None without one."""
    value = next((value for name, value in headers if name.lower() == b"authorization"), None)
    if value is None:
        return None
    scheme, _, token = value.partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return token.strip()
