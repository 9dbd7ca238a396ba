"""Hostile ``/v1/responses`` bodies never get a 5xx, and the metadata and attribute limits
OpenAI documents are 400s naming the field: through the real app, without an engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import response_create_params

from gateway.app import create_app
from gateway.http.errors import APIError
from gateway.openai.validation import check_attributes, check_metadata
from gateway.settings import Settings
from tests.unit.test_gateway_fuzz import HEADERS, KEY, LOADING, json_value

FIELDS = sorted(
    {*response_create_params.ResponseCreateParamsBase.__annotations__, "stream", "type", "role"}
)
TOOL = {"type": "file_search", "vector_store_ids": ["vs_1"]}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(model="m", api_keys=KEY)))


def _post(client: TestClient, payload: Any) -> tuple[int, dict[str, Any]]:
    response = client.post("/v1/responses", content=json.dumps(payload).encode(), headers=HEADERS)
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return response.status_code, error


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    overrides=st.dictionaries(st.sampled_from(FIELDS), json_value, max_size=4),
    item=st.dictionaries(st.sampled_from(["role", "content", "type", "text"]), json_value),
    tool=st.dictionaries(st.sampled_from([*TOOL, "filters", "max_num_results"]), json_value),
)
def test_hostile_fields_are_client_errors(
    client: TestClient, overrides: dict[str, Any], item: dict[str, Any], tool: dict[str, Any]
) -> None:
    payload = {"model": "m", "input": [{"role": "user", "content": "hi"}, item]}
    payload["tools"] = [{**TOOL, **tool}]
    status, error = _post(client, {**payload, **overrides})
    if status >= 500:
        assert (status, error["message"]) == (503, LOADING), error


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"input": "\ud800"}, "input"),
        ({"input": "x", "instructions": "a\udfff"}, "instructions"),
        ({"input": "x", "metadata": {"k": "\ud800"}}, "metadata.k"),
        (
            {
                "input": "x",
                "tools": [{**TOOL, "filters": {"type": "eq", "key": "\ud800", "value": 1}}],
            },
            "tools.0.filters.key",
        ),
        (
            {"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["\ud800"]}]},
            "tools.0.vector_store_ids",
        ),
    ],
)
def test_lone_surrogates_are_400s_naming_the_field(
    client: TestClient, payload: dict[str, Any], param: str
) -> None:
    status, error = _post(client, {"model": "m", **payload})
    assert (status, error["param"]) == (400, param)


def test_metadata_and_attributes_follow_openai_limits() -> None:
    assert check_metadata({"k": "v"}) == {"k": "v"}
    assert check_attributes({"year": 1871, "public": True}) == {"year": 1871, "public": True}
    for bad, param in (
        ({f"k{n}": "v" for n in range(17)}, "metadata"),
        ({"k" * 65: "v"}, "metadata"),
        ({"k": "v" * 513}, "metadata.k"),
        ({"k": 5}, "metadata.k"),
    ):
        with pytest.raises(APIError) as refused:
            check_metadata(bad)
        assert (refused.value.status, refused.value.param) == (400, param)
    with pytest.raises(APIError):
        check_attributes({"k": "v" * 513})
