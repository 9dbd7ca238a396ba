"""Limits before work: the API key and the body size are checked before any body byte is read.

``RequestLimits`` is a pure ASGI middleware. A request without a valid key is answered 401 from
its headers alone (a valid key's caller is left in the scope for the routes), so an
unauthenticated client cannot make the server read, buffer or parse anything. The body limit
is decided from ``Content-Length`` up front (413), and while reading by counting the bytes
handed to the app, which never receives more than the limit. Bytes a client
sends after its answer are discarded by the HTTP server, so memory stays bounded either way.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.callers import Caller
from gateway.http.errors import APIError, error_response
from gateway.http.projects import KeyRing
from gateway.settings import Settings

OPEN_PATHS = frozenset({"/health", "/metrics"})
"""Answered without a key: probes and scrapers carry none, and neither reads a body."""

DOCUMENT_PATHS = ("/v1/documents", "/v1/files")
"""Ingest bodies hold whole documents (``/v1/files`` uploads too): bounded by
``max_ingest_request_bytes`` instead, which the routes also enforce per upload while they stream."""

UNAUTHORIZED = "Missing or invalid API key: send 'Authorization: Bearer <key>'."
CALLER = "ragblend.caller"
"""Where ``RequestLimits`` leaves the request's `Caller` in the ASGI scope, for the routes."""


def unauthorized() -> APIError:
    return APIError(401, UNAUTHORIZED)


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the body passes the limit; the app answers it with a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.")


def body_limit(path: str, settings: Settings) -> int:
    if path.startswith(DOCUMENT_PATHS):
        return settings.max_ingest_request_bytes
    return settings.max_request_bytes


def _declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The ``Content-Length``, or None when absent; ValueError when it is not a number."""
    value = next((value for name, value in headers if name.lower() == b"content-length"), None)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise ValueError(value)
    return int(value)


class RequestLimits:
    """Refuse unauthenticated and oversized requests before the app reads their bodies."""

    def __init__(self, app: ASGIApp, settings: Settings, keys: KeyRing) -> None:
        self.app = app
        self.settings = settings
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        caller: Caller | None = self.keys.caller(headers)
        if caller is None:
            await error_response(unauthorized())(scope, receive, send)
            return
        scope[CALLER] = caller
        limit = body_limit(scope["path"], self.settings)
        try:
            declared = _declared_length(headers)
        except ValueError:
            error = APIError(400, "The Content-Length header is not a number.")
            await error_response(error)(scope, receive, send)
            return
        if declared is not None and declared > limit:
            message = f"The request body has {declared} bytes; the limit is {limit}."
            await error_response(APIError(413, message))(scope, receive, send)
            return
        await self.app(scope, _counting(receive, limit), send)


def _counting(receive: Receive, limit: int) -> Receive:
    """``receive`` that raises ``BodyTooLarge`` instead of handing over more than ``limit``."""
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
        return message

    return counted
