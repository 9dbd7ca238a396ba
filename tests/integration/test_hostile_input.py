"""Hostile input against the real server: each gets a 4xx in OpenAI's shape and the client's
keep-alive connection stays open for its next request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


def _connection(response: httpx.Response) -> Any:
    """The client side of the TCP connection that carried ``response``."""
    return response.extensions["network_stream"].get_extra_info("client_addr")


def _post_raw(client: httpx.Client, path: str, payload: Any) -> httpx.Response:
    """JSON with ``ensure_ascii``: lone surrogates travel as ``\\ud800`` escapes."""
    body = json.dumps(payload).encode()
    return client.post(path, content=body, headers={"Content-Type": "application/json"})


def _follow_up_on_the_same_connection(client: httpx.Client, server: Server, first: Any) -> None:
    body = {"model": server.model, "prompt": "Hello", "max_tokens": 2}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    assert _connection(response) == first


def _assert_error(response: httpx.Response, status: int, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param


@pytest.mark.parametrize(
    ("path", "fields", "param"),
    [
        ("/v1/completions", {"prompt": "hi \ud800"}, "prompt"),
        ("/v1/completions", {"prompt": "hi", "stop": ["\udfff"]}, "stop.0"),
        ("/v1/completions", {"prompt": "hi", "documents": ["ok", "\ud800"]}, "documents.1"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "\ud800"}]}, None),
        ("/v1/completions", {"prompt": "hi", "seed": 2**64}, "seed"),
        ("/v1/completions", {"prompt": "hi", "seed": 2**64, "stream": True}, "seed"),
        ("/v1/completions", {"prompt": [1, 2, 3], "documents": ["a document"]}, "prompt"),
        ("/v1/completions", {"prompt": ["p"] * 1000, "n": 16}, "n"),
    ],
)
def test_hostile_fields_get_400_and_keep_the_connection(
    server: Server, path: str, fields: dict[str, Any], param: str | None
) -> None:
    with server.client() as client:
        response = _post_raw(client, path, {"model": server.model, "max_tokens": 2, **fields})
        _assert_error(response, 400, param)
        _follow_up_on_the_same_connection(client, server, _connection(response))


def test_non_ascii_bearer_token_is_401_and_keeps_the_connection(server: Server) -> None:
    with server.client() as client:
        headers = {"Authorization": "Bearer ключ-é".encode()}
        response = client.get("/v1/models", headers=headers)
        _assert_error(response, 401)
        _follow_up_on_the_same_connection(client, server, _connection(response))


def test_docs_need_the_key(server: Server) -> None:
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(f"{server.url}{path}").status_code == 401
    with server.client() as client:
        assert client.get("/openapi.json").status_code == 200


def test_oversized_body_is_413_and_keeps_the_connection(server: Server) -> None:
    with server.client() as client:
        body = {"model": server.model, "prompt": "x" * (17 * MIB)}
        response = _post_raw(client, "/v1/completions", body)
        _assert_error(response, 413)
        _follow_up_on_the_same_connection(client, server, _connection(response))


def _resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1)) * 1024


def _chunks(total: int, size: int = MIB) -> Iterator[bytes]:
    for _ in range(total // size):
        yield b"[" * size


def test_unauthenticated_huge_body_leaves_server_memory_bounded(server: Server) -> None:
    assert server.process is not None
    before = _resident_bytes(server.process.pid)
    headers = {"Content-Type": "application/json"}
    for declared in (True, False):  # with Content-Length, then chunked
        length = {"Content-Length": str(200 * MIB)} if declared else {}
        response = httpx.post(
            f"{server.url}/v1/completions",
            content=_chunks(200 * MIB),
            headers={**headers, **length},
            timeout=120,
        )
        _assert_error(response, 401)
    assert _resident_bytes(server.process.pid) - before < 50 * MIB


def test_document_routes_are_counted_as_documents(server: Server) -> None:
    with server.client() as client:
        assert client.get("/v1/documents").status_code == 200
        metrics = client.get("/metrics").text
    assert re.search(r'ragblend_requests_total\{route="/v1/documents",status="200"\}', metrics)
