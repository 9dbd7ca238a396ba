"""Limits before work: the key and the body size are enforced before the app reads the body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI

from gateway.app import create_app
from gateway.callers import ANONYMOUS, Caller, parse_entries
from gateway.http.admission import AdmissionGate, check_choice_count
from gateway.http.errors import APIError
from gateway.http.limits import body_limit
from gateway.http.metrics import route_label
from gateway.http.projects import KeyRing
from gateway.settings import Settings

KEY = "test-key"
LIMIT = 64 * 1024
CHUNK = 16 * 1024
HUGE = 400 * 1024 * 1024


@dataclass
class Exchange:
    status: int
    body: dict[str, Any]
    bytes_read: int
    """Body bytes pulled from the connection: all the server ever held of the request."""


def _app(**overrides: Any) -> FastAPI:
    return create_app(Settings(model="m", api_keys=KEY, max_request_bytes=LIMIT, **overrides))


def _endless_body() -> Iterator[bytes]:
    """A body of HUGE bytes, produced only as it is read."""
    for _ in range(HUGE // CHUNK):
        yield b" " * CHUNK


async def _call(
    app: FastAPI,
    path: str,
    body: Iterator[bytes],
    headers: dict[bytes, bytes],
    method: str = "POST",
) -> Exchange:
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        chunk = next(body, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), *headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)
    payload = b"".join(message.get("body", b"") for message in sent[1:])
    return Exchange(sent[0]["status"], json.loads(payload), read)


async def test_unauthenticated_huge_body_is_refused_without_reading_it() -> None:
    exchange = await _call(_app(), "/v1/completions", _endless_body(), {})
    assert exchange.status == 401
    assert exchange.body["error"]["type"] == "authentication_error"
    assert exchange.bytes_read == 0


async def test_declared_oversized_body_is_refused_before_reading() -> None:
    headers = {b"authorization": f"Bearer {KEY}".encode(), b"content-length": str(HUGE).encode()}
    exchange = await _call(_app(), "/v1/completions", _endless_body(), headers)
    assert exchange.status == 413
    assert str(LIMIT) in exchange.body["error"]["message"]
    assert exchange.bytes_read == 0


async def test_undeclared_oversized_body_stops_at_the_limit() -> None:
    headers = {b"authorization": f"Bearer {KEY}".encode()}
    exchange = await _call(_app(), "/v1/completions", _endless_body(), headers)
    assert exchange.status == 413
    assert exchange.body["error"]["type"] == "invalid_request_error"
    assert exchange.bytes_read <= LIMIT + CHUNK


async def test_body_under_the_limit_reaches_the_route() -> None:
    body = json.dumps({"model": "m", "prompt": "\ud800"}).encode()
    headers = {b"authorization": f"Bearer {KEY}".encode()}
    exchange = await _call(_app(), "/v1/completions", iter([body]), headers)
    assert exchange.status == 400
    assert exchange.body["error"]["param"] == "prompt"


async def test_document_upload_over_the_request_limit_but_under_the_ingest_limit_passes() -> None:
    upload_bytes = 4 * LIMIT
    headers = {
        b"authorization": f"Bearer {KEY}".encode(),
        b"content-length": str(upload_bytes).encode(),
    }
    app = _app(max_ingest_request_bytes=upload_bytes)
    exchange = await _call(app, "/v1/documents", iter([b" " * upload_bytes]), headers)
    assert exchange.status == 503  # the route answers: no library without a loaded model


async def test_open_paths_need_no_key_and_docs_do() -> None:
    app, key = _app(), {b"authorization": f"Bearer {KEY}".encode()}
    health = await _call(app, "/health", iter([]), {}, "GET")
    docs = await _call(app, "/openapi.json", iter([]), {}, "GET")
    with_key = await _call(app, "/openapi.json", iter([]), key, "GET")
    assert (health.status, docs.status, with_key.status) == (503, 401, 200)


@pytest.mark.parametrize(
    ("header", "valid"),
    [
        (b"Bearer test-key", True),
        (b"bearer  test-key ", True),
        (b"Bearer other", False),
        (b"Basic test-key", False),
        (b"", False),
        ("Bearer tést-kéy".encode(), False),
        (b"Bearer \xff\xfe\x00", False),
        ("Bearer ключ".encode(), True),
    ],
)
def test_bearer_keys_are_compared_as_bytes(header: bytes, valid: bool) -> None:
    keys = KeyRing(parse_entries(["test-key", "ключ:ru"], "keys"), None)
    assert (keys.caller([(b"authorization", header)]) is not None) is valid


def test_no_keys_configured_means_open() -> None:
    assert KeyRing({}, None).caller([]) == ANONYMOUS == Caller("default", admin=False)


def test_document_routes_take_the_ingest_limit() -> None:
    settings = Settings(max_request_bytes=1024 * 1024, max_ingest_request_bytes=32 * 1024 * 1024)
    assert body_limit("/v1/completions", settings) == 1024 * 1024
    assert body_limit("/v1/documents", settings) == 32 * 1024 * 1024


def test_choices_are_prompts_times_n() -> None:
    check_choice_count(4, 16, limit=64)
    with pytest.raises(APIError) as caught:
        check_choice_count(1000, 16, limit=64)
    assert caught.value.status == 400
    assert "16000" in caught.value.message and caught.value.param == "n"


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/v1/documents", "/v1/documents"),
        ("/v1/documents/abc", "/v1/documents/{id}"),
        ("/v1/models/x/y", "/v1/models/{id}"),
        ("/v1/completions", "/v1/completions"),
        ("/docs", "other"),
    ],
)
def test_route_labels(path: str, label: str) -> None:
    assert route_label(path) == label


def test_background_work_waits_for_a_quiet_moment_after_the_last_request() -> None:
    gate = AdmissionGate(limit=2)
    assert not gate.busy(quiet_s=60)  # nothing served yet
    gate.enter()
    assert gate.busy() and gate.busy(quiet_s=60)
    gate.leave()
    assert not gate.busy()  # with no quiet period, idle as soon as the request left
    assert gate.busy(quiet_s=60)  # the next request of a client in a loop is milliseconds away
