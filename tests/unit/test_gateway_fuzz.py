"""Hostile request bodies never get a 5xx: fuzzed through the real app, without an engine.

A request that fails validation never reaches the engine, so without one every answer is a 4xx
in OpenAI's error shape, or the 503 "still loading" that only a valid request can reach.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gateway.app import create_app
from gateway.openai.protocol import ChatCompletionRequest, CompletionRequest
from gateway.settings import Settings

KEY = "fuzz-key"
HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
LOADING = "The model is still loading; retry when /health reports ready."

any_text = st.text(st.characters(exclude_categories=()), max_size=12)
"""Unicode including lone surrogates, which JSON carries as ``\\ud800`` escapes."""
any_number = (
    st.integers()
    | st.sampled_from([2**63, 2**64, -(2**64), 10**300])
    | st.floats(allow_nan=True, allow_infinity=True)
)
leaf = st.none() | st.booleans() | any_number | any_text
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


def _fields_of(*models: Any) -> list[str]:
    names = {name for model in models for name in model.model_fields}
    nested = {"content", "role", "text", "type", "mode", "top_k", "title", "json_schema"}
    structured = {"name", "schema", "strict", "json", "regex", "choice", "grammar", "json_object"}
    return sorted(names | nested | structured)


def _overrides(fields: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(fields) | any_text, json_value, max_size=4)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(model="m", api_keys=KEY)))


def _post(client: TestClient, path: str, payload: Any, model: type[BaseModel]) -> None:
    """A 4xx, or the 503 a valid request meets without an engine: never a 500."""
    body = json.dumps(payload).encode()  # ensure_ascii: surrogates travel as escapes
    response = client.post(path, content=body, headers=HEADERS)
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if response.status_code >= 500:
        assert (response.status_code, error["message"]) == (503, LOADING), error
        model.model_validate(json.loads(body))  # only valid requests get this far


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(overrides=_overrides(_fields_of(CompletionRequest)))
def test_completions_never_fail_on_hostile_fields(
    client: TestClient, overrides: dict[str, Any]
) -> None:
    payload = {"model": "m", "prompt": "hello", **overrides}
    _post(client, "/v1/completions", payload, CompletionRequest)


@FUZZ
@given(
    overrides=_overrides(_fields_of(ChatCompletionRequest)),
    message=st.dictionaries(st.sampled_from(["role", "content", "name"]), json_value),
)
def test_chat_never_fails_on_hostile_fields(
    client: TestClient, overrides: dict[str, Any], message: dict[str, Any]
) -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}, message]}
    _post(client, "/v1/chat/completions", {**payload, **overrides}, ChatCompletionRequest)


@FUZZ
@given(payload=json_value)
def test_any_json_body_is_a_client_error(client: TestClient, payload: Any) -> None:
    _post(client, "/v1/completions", payload, CompletionRequest)


def _raw(client: TestClient, body: bytes) -> tuple[int, dict[str, Any]]:
    response = client.post("/v1/completions", content=body, headers=HEADERS)
    return response.status_code, response.json()["error"]


def test_deep_nesting_and_huge_numbers_are_client_errors(client: TestClient) -> None:
    for body in (
        b"[" * 100_000,
        b'{"model": "m", "prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b'{"model": "m", "prompt": "x", "seed": 1' + b"0" * 5000 + b"}",
        b'{"model": "m", "prompt": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 bytes
        b'{"model": "m", "prompt": "\xff"}',
    ):
        status, error = _raw(client, body)
        assert status == 400, (body[:40], error)


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"prompt": "\ud800"}, "prompt"),
        ({"prompt": ["ok", "a\udfffb"]}, "prompt.1"),
        ({"prompt": "x", "stop": ["\ud800"]}, "stop.0"),
        ({"prompt": "x", "documents": ["fine", "\ud800"]}, "documents.1"),
        ({"prompt": "x", "seed": 2**64}, "seed"),
        ({"prompt": "x", "seed": -(2**63) - 1}, "seed"),
        ({"prompt": [1, 2, 3], "documents": ["a document"]}, "prompt"),
        ({"prompt": [[1], [2]], "retrieval": {"top_k": 2}}, "prompt"),
        ({"prompt": ["p"] * 1000, "n": 16}, "n"),
        ({"prompt": "x", "documents": [{"title": "t", "text": "\ud800"}]}, "documents.0.text"),
        ({"prompt": "x", "logit_bias": {"1": float("inf")}}, "logit_bias.1"),
        ({"prompt": "x", "repetition_penalty": 1e300}, "repetition_penalty"),
        (
            {
                "prompt": "x",
                "response_format": {"type": "json_object", "json_schema": {"name": "n"}},
            },
            "response_format",
        ),
    ],
)
def test_the_reported_inputs_get_400_naming_the_param(
    client: TestClient, payload: dict[str, Any], param: str
) -> None:
    status, error = _raw(client, json.dumps({"model": "m", **payload}).encode())
    assert (status, error["param"], error["type"]) == (400, param, "invalid_request_error")


def test_lone_surrogate_in_a_chat_message_names_it(client: TestClient) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi \ud800"}]}]
    body = json.dumps({"model": "m", "messages": messages}).encode()
    response = client.post("/v1/chat/completions", content=body, headers=HEADERS)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages.0.content.0.text"


def test_non_ascii_bearer_token_is_401(client: TestClient) -> None:
    headers = {b"Authorization": "Bearer ключ".encode(), b"Content-Type": b"application/json"}
    response = client.post("/v1/completions", content=b"{}", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
