"""API-key entries and the callers they name: ``key``, ``key:project`` or
``key:project:admin``.

Parsed both where the settings are validated and where requests are authenticated
(`gateway.http.projects`), so it sits below both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from retriever import DEFAULT_PROJECT

PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""Project names: 1-64 letters, digits, ``_`` or ``-``, starting with a letter or digit."""
ADMIN = "admin"


@dataclass(frozen=True)
class Caller:
    """The principal behind a request."""

    project: str = DEFAULT_PROJECT
    admin: bool = False


ANONYMOUS = Caller()
"""Every request when authentication is off."""


def parse_entries(entries: Iterable[str], source: str) -> dict[str, Caller]:
    """Keys and their callers from ``key[:project[:admin]]`` entries; blank entries and, in a
    file, lines starting with ``#`` are skipped. A bad entry raises ValueError naming ``source``
    and the entry's position (never the key itself: it is a secret)."""
    callers: dict[str, Caller] = {}
    for position, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        key, *rest = (part.strip() for part in entry.split(":"))
        where = f"{source} entry {position}"
        if not key:
            raise ValueError(f"{where} has an empty key; entries are key[:project[:admin]]")
        if len(rest) > 2 or (len(rest) == 2 and rest[1] != ADMIN):
            raise ValueError(
                f"{where} is not key, key:project or key:project:admin (the third part may "
                f"only be '{ADMIN}')"
            )
        project = rest[0] if rest else DEFAULT_PROJECT
        if not PROJECT_NAME.fullmatch(project):
            raise ValueError(
                f"{where} names project {project!r}; a project is 1-64 letters, digits, '_' or "
                "'-', starting with a letter or digit"
            )
        caller = Caller(project, admin=len(rest) == 2)
        if callers.get(key, caller) != caller:
            raise ValueError(f"{where} repeats a key with another project or role")
        callers[key] = caller
    return callers
