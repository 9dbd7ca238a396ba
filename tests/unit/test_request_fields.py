"""Request fields either work or are refused naming them: 400s before any engine, and the
``SamplingParams`` the accepted ones become (the model's defaults under the request's)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from vllm import SamplingParams

from gateway.app import create_app
from gateway.http.errors import APIError
from gateway.openai.protocol import ChatCompletionRequest, CompletionRequest
from gateway.openai.sampling import sampling_params
from gateway.settings import Settings

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(model="m")))  # no lifespan: no engine


@pytest.mark.parametrize(
    ("path", "extra", "param", "words"),
    [
        ("/v1/completions", {"best_of": 2}, "best_of", "n"),
        ("/v1/completions", {"suffix": "end"}, "suffix", "suffix"),
        ("/v1/completions", {"echo": True}, "echo", "echo"),
        ("/v1/chat/completions", {"reasoning_effort": "high"}, "reasoning_effort", "reason"),
        ("/v1/chat/completions", {"functions": [{"name": "f"}]}, "functions", "tools"),
        ("/v1/chat/completions", {"function_call": "auto"}, "function_call", "tool_choice"),
        ("/v1/chat/completions", {"modalities": ["text", "audio"]}, "modalities", "text"),
        ("/v1/chat/completions", {"audio": {"voice": "x"}}, "audio", "audio"),
        ("/v1/chat/completions", {"prediction": {"type": "content"}}, "prediction", "predict"),
        ("/v1/chat/completions", {"web_search_options": {}}, "web_search_options", "web"),
        ("/v1/chat/completions", {"temperatur": 0.2}, "temperatur", "Unrecognized"),
        ("/v1/chat/completions", {"top_k": -2}, "top_k", "-1"),
        ("/v1/chat/completions", {"min_p": 1.5}, "min_p", "1"),
        ("/v1/chat/completions", {"repetition_penalty": 0}, "repetition_penalty", "0"),
        ("/v1/chat/completions", {"min_tokens": 9, "max_tokens": 4}, None, "min_tokens"),
        ("/v1/chat/completions", {"logit_bias": {"cat": 1}}, "logit_bias.cat", "pattern"),
        ("/v1/chat/completions", {"logit_bias": {"5": 101}}, "logit_bias.5", "100"),
        ("/v1/chat/completions", {"stop_token_ids": [-1]}, "stop_token_ids.0", "0"),
        (
            "/v1/chat/completions",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": 7}},
                }
            },
            "response_format.json_schema.schema",
            "JSON Schema",
        ),
        (
            "/v1/chat/completions",
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a b"}}},
            "response_format.json_schema.name",
            "pattern",
        ),
        ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "response_format.type", ""),
        (
            "/v1/completions",
            {"structured_outputs": {"choice": []}},
            "structured_outputs.choice",
            "",
        ),
        (
            "/v1/completions",
            {"structured_outputs": {"regex": "a", "choice": ["a"]}},
            "structured_outputs",
            "one",
        ),
        (
            "/v1/completions",
            {"structured_outputs": {"json": "{not json"}},
            "structured_outputs.json",
            "JSON",
        ),
        ("/v1/completions", {"documents": [{"title": "only a title"}]}, "documents.0.text", ""),
        ("/v1/completions", {"documents": [{"title": "t", "text": " "}]}, "documents", "empty"),
        ("/v1/completions", {"documents": [{"text": "x", "url": "u"}]}, "documents.0.url", ""),
    ],
)
def test_refused_or_out_of_bounds_fields_are_400s_naming_them(
    client: TestClient, path: str, extra: dict[str, Any], param: str | None, words: str
) -> None:
    base = CHAT if "chat" in path else {"model": "m", "prompt": "hi"}
    reply = client.post(path, json={**base, **extra})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param, error
    assert words in error["message"], error


@pytest.mark.parametrize(
    "extra",
    [
        {"user": "u", "metadata": {"k": "v"}, "store": True, "service_tier": "auto"},
        {"stop": None, "logprobs": None, "seed": None},
        {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"},
        {"documents": ["plain", {"title": "T", "text": "body"}], "modalities": ["text"]},
        {"reasoning_effort": "none", "verbosity": "medium", "prompt_cache_key": "k"},
    ],
)
def test_known_harmless_fields_pass_validation(client: TestClient, extra: dict) -> None:
    reply = client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert reply.status_code == 503, reply.text  # valid: only the missing engine stops it


class FakeEngine:
    max_logprobs = 20
    vocab_size = 100

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.sampling_defaults = defaults
        self.verified: list[SamplingParams] = []

    def verify(self, params: SamplingParams) -> None:
        self.verified.append(params)


def test_unset_fields_take_the_model_defaults_then_openai_defaults() -> None:
    engine = FakeEngine({"temperature": 0.6, "top_k": 50, "repetition_penalty": 1.1})
    fields = ChatCompletionRequest.model_validate({**CHAT, "top_k": 5, "min_p": 0.1})
    params = sampling_params(fields, 16, None, engine)
    assert (params.temperature, params.top_k, params.min_p) == (0.6, 5, 0.1)
    assert (params.repetition_penalty, params.top_p) == (1.1, 1.0)
    assert engine.verified == [params]


def test_vllm_fields_and_structured_outputs_reach_sampling_params() -> None:
    body = {
        "model": "m",
        "prompt": "p",
        "logit_bias": {"7": 5},
        "stop_token_ids": [3],
        "min_tokens": 2,
        "ignore_eos": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}},
    }
    params = sampling_params(CompletionRequest.model_validate(body), 8, None, FakeEngine({}))
    assert (params.logit_bias, params.stop_token_ids, params.min_tokens) == ({7: 5.0}, [3], 2)
    assert params.ignore_eos and params.structured_outputs.json == SCHEMA
    choice = CompletionRequest.model_validate(
        {"model": "m", "prompt": "p", "structured_outputs": {"choice": ["a", "b"]}}
    )
    assert sampling_params(choice, 8, None, FakeEngine({})).structured_outputs.choice == ["a", "b"]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logit_bias": {"100": 1}}, "logit_bias"),
        ({"stop_token_ids": [500]}, "stop_token_ids"),
        ({"min_tokens": 9}, "min_tokens"),
        (
            {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
            "structured_outputs",
        ),
    ],
)
def test_what_needs_the_model_is_checked_against_it(extra: dict, param: str) -> None:
    fields = CompletionRequest.model_validate({"model": "m", "prompt": "p", **extra})
    with pytest.raises(APIError) as refused:
        sampling_params(fields, 8, None, FakeEngine({}))
    assert (refused.value.status, refused.value.param) == (400, param)


def test_titled_documents_become_title_then_text() -> None:
    fields = CompletionRequest.model_validate(
        {"model": "m", "prompt": "p", "documents": [{"title": "T", "text": "body"}, "plain"]}
    )
    assert fields.document_texts == ["T\nbody", "plain"]
