"""Query parameters and bodies of OpenAI's cursor-paginated lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, Query

from gateway.http.errors import APIError
from retriever import PageRequest, UnknownCursor

Record = TypeVar("Record")


def page_request(
    limit: int = Query(20, ge=1, le=100),
    order: Literal["asc", "desc"] = Query("desc"),
    after: str | None = Query(None),
    before: str | None = Query(None),
) -> PageRequest:
    return PageRequest(limit, order, after, before)


def file_page_request(
    limit: int = Query(10_000, ge=1, le=10_000),
    order: Literal["asc", "desc"] = Query("desc"),
    after: str | None = Query(None),
) -> PageRequest:
    """``/v1/files`` pages up to 10,000 files, and only forward."""
    return PageRequest(limit, order, after)


Page = Annotated[PageRequest, Depends(page_request)]
FilePage = Annotated[PageRequest, Depends(file_page_request)]


def cursor_error(exc: UnknownCursor) -> APIError:
    return APIError(400, str(exc), param=exc.param)


def list_body(
    records: Sequence[Record], has_more: bool, render: Callable[[Record], dict[str, Any]]
) -> dict[str, Any]:
    data = [render(record) for record in records]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
