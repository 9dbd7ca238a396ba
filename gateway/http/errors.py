"""Errors in OpenAI's format: ``{"error": {"message", "type", "param", "code"}}``.

Every failure a client can cause ends as one of these, and an unexpected exception becomes a
logged 500 in the same shape without closing the client's keep-alive connection.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retriever import LibraryUnavailable

log = logging.getLogger(__name__)

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
}

RETRY_AFTER_S = {429: 1, 503: 5}
"""``Retry-After`` seconds of the statuses a client should retry: the concurrency limit frees
within a generation or so; loading, shutting down and an unavailable library take longer."""

LONE_SURROGATE = "lone_surrogate"
"""Validation error type of text that is not valid Unicode; preferred when describing errors."""
REFUSED_FIELD = "unsupported_field"
"""Validation error type of a field ragblend refuses; its message is the whole explanation."""


class APIError(Exception):
    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)


def _encodable(text: str) -> str:
    """Lone surrogates (from client input) written as ``\\udXXX`` so the body encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    param = None if param is None else _encodable(param)
    return {"error": {"message": _encodable(message), "type": kind, "param": param, "code": code}}


def error_response(error: APIError, headers: dict[str, str] | None = None) -> JSONResponse:
    if error.status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if error.status in RETRY_AFTER_S:
        headers = {"Retry-After": str(RETRY_AFTER_S[error.status]), **(headers or {})}
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _param(location: tuple[Any, ...]) -> str | None:
    """``("body", "prompt", "list[str]", 1)`` -> ``"prompt.1"``: fields and indices, no types
    (nor the capitalized tags of union alternatives)."""
    parts = [
        str(part)
        for part in location
        if part != "body"
        and (
            isinstance(part, int) or not (str(part)[:1].isupper() or any(c in part for c in "[(,"))
        )
    ]
    return ".".join(parts) or None


def _describe_validation(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    first = next((error for error in errors if error.get("type") == LONE_SURROGATE), errors[0])
    if first.get("type") == "json_invalid":
        return "The request body is not valid JSON.", None
    param = _param(tuple(first.get("loc", ())))
    if param is None:
        return f"Invalid request body: {first.get('msg')}", None
    if first.get("type") == "extra_forbidden":
        return f"Unrecognized request argument supplied: {param}", param
    if first.get("type") == REFUSED_FIELD:
        return f"'{param}': {first.get('msg')}", param
    return f"Invalid value for '{param}': {first.get('msg')}", param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _describe_validation(exc)
        return error_response(APIError(400, message, param=param))

    @app.exception_handler(LibraryUnavailable)
    async def _library_unavailable(_: Request, exc: LibraryUnavailable) -> JSONResponse:
        return error_response(APIError(503, str(exc), code="library_unavailable"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(APIError(exc.status_code, str(exc.detail)), exc.headers)


class ContainUnexpectedErrors:
    """ASGI middleware: an exception escaping the app is logged and answered with a 500 in
    OpenAI's shape, so the server stays up and the keep-alive connection stays usable.

    A response started but not finished cannot be repaired: then the exception goes on to the
    server, which closes that connection (streams end their own errors with an event first).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = finished = False

        async def watch(message: Message) -> None:
            nonlocal started, finished
            started = started or message["type"] == "http.response.start"
            finished = message["type"] == "http.response.body" and not message.get("more_body")
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            log.exception("unhandled error serving %s %s", scope["method"], scope["path"])
            if finished:
                return
            if started:
                raise
            response = error_response(APIError(500, "Internal server error."))
            await response(scope, receive, send)
