"""Cursor pagination as OpenAI's list endpoints do it: ``limit``, ``order``, ``after``, ``before``.

``after`` and ``before`` name objects of the list; a page holds the objects strictly past them in
the requested order, and ``has_more`` says whether more lie beyond the page's far end.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Literal

Order = Literal["asc", "desc"]


@dataclass(frozen=True)
class PageRequest:
    limit: int = 20
    order: Order = "desc"
    after: str | None = None
    before: str | None = None


@dataclass(frozen=True)
class ListSource:
    """Where a list's rows come from: a FROM clause (joins allowed), the column that orders rows
    by creation, the column holding the ids cursors name, and a condition scoping the list."""

    tables: str
    seq_column: str
    id_column: str
    scope: str = "TRUE"


class UnknownCursor(ValueError):
    """``after`` or ``before`` names no object of the list."""

    def __init__(self, param: str, object_id: str) -> None:
        super().__init__(f"'{object_id}' given as '{param}' is not in this list.")
        self.param = param


def select_page(
    connection: sqlite3.Connection,
    columns: str,
    source: ListSource,
    scope_parameters: tuple[Any, ...],
    page: PageRequest,
) -> tuple[list[tuple[Any, ...]], bool]:
    """One page of rows in the requested order, and whether more rows follow it."""
    conditions, parameters = [source.scope], list(scope_parameters)
    descending = page.order == "desc"
    for param, cursor, past_is_lower in (
        ("after", page.after, descending),
        ("before", page.before, not descending),
    ):
        if cursor is None:
            continue
        conditions.append(f"{source.seq_column} {'<' if past_is_lower else '>'} ?")
        parameters.append(_seq_of(connection, source, scope_parameters, param, cursor))
    backwards = page.before is not None and page.after is None
    ascending = descending == backwards
    rows = connection.execute(
        f"SELECT {columns} FROM {source.tables} WHERE {' AND '.join(conditions)} "
        f"ORDER BY {source.seq_column} {'ASC' if ascending else 'DESC'} LIMIT ?",
        (*parameters, page.limit + 1),
    ).fetchall()
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    if backwards:
        rows.reverse()
    return rows, has_more


def _seq_of(
    connection: sqlite3.Connection,
    source: ListSource,
    scope_parameters: tuple[Any, ...],
    param: str,
    object_id: str,
) -> int:
    row = connection.execute(
        f"SELECT {source.seq_column} FROM {source.tables} "
        f"WHERE {source.scope} AND {source.id_column} = ?",
        (*scope_parameters, object_id),
    ).fetchone()
    if row is None:
        raise UnknownCursor(param, object_id)
    return row[0]
