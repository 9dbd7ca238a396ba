"""``/v1/embeddings`` through the ``openai`` SDK and as raw JSON, over a stand-in embedder."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
from fastapi.testclient import TestClient
from openai.types import CreateEmbeddingResponse

from tests.unit.gateway_fakes import KEY, WordEmbedder, client, ready_app

TEXTS = ["a cat and a dog", "the sky over the sea"]


@pytest.fixture
def api() -> TestClient:
    return client(ready_app())


def sdk(api: TestClient) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=api)


def test_the_sdk_gets_the_embedder_s_vectors(api: TestClient) -> None:
    """The SDK asks for base64 and decodes it: the floats must survive the trip."""
    reply = sdk(api).embeddings.create(model="served", input=TEXTS)
    expected = WordEmbedder().embed(TEXTS)
    assert reply.model == "word-embedder"
    assert [item.index for item in reply.data] == [0, 1]
    np.testing.assert_array_equal(np.array([item.embedding for item in reply.data]), expected)
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == 5 + 2 + 5 + 2


def test_float_and_base64_carry_the_same_vector(api: TestClient) -> None:
    body = {"model": "word-embedder", "input": "a cat"}
    floats = api.post("/v1/embeddings", json={**body, "encoding_format": "float"}).json()
    CreateEmbeddingResponse.model_validate(floats)
    packed = api.post("/v1/embeddings", json={**body, "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    assert decoded.tolist() == pytest.approx(floats["data"][0]["embedding"])
    assert len(decoded) == WordEmbedder.dim
    assert floats["usage"] == {"prompt_tokens": 4, "total_tokens": 4}


def test_the_model_s_own_dimensions_may_be_asked_for(api: TestClient) -> None:
    reply = api.post("/v1/embeddings", json={"model": "m", "input": "x", "dimensions": 4})
    assert reply.status_code == 200 and len(reply.json()["data"][0]["embedding"]) == 4


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": "served"}, "input"),
        ({"model": "served", "input": [1, 2, 3]}, "input"),
        ({"model": "served", "input": [[1, 2], [3]]}, "input"),
        ({"model": "served", "input": ["ok", 3]}, "input"),
        ({"model": "served", "input": []}, "input"),
        ({"model": "served", "input": ["ok", ""]}, "input"),
        ({"model": "served", "input": ["x"] * 2049}, "input"),
        ({"model": "served", "input": "x", "dimensions": 3}, "dimensions"),
        ({"model": "served", "input": "x", "encoding_format": "hex"}, "encoding_format"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: TestClient, body: dict[str, object], param: str
) -> None:
    reply = api.post("/v1/embeddings", json=body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


def test_a_text_longer_than_the_model_reads_is_refused(api: TestClient) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(api).embeddings.create(model="served", input=["short", "word " * 9])
    assert caught.value.code == "context_length_exceeded"
    assert "item 1 has 11 tokens" in caught.value.message


def test_another_model_is_a_404_naming_the_embedding_model(api: TestClient) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        sdk(api).embeddings.create(model="text-embedding-3-small", input="x")
    assert caught.value.code == "model_not_found"
    assert "word-embedder" in caught.value.message


def test_without_a_library_embeddings_are_unavailable() -> None:
    app = ready_app()
    app.state.ragblend.library = None
    reply = client(app).post("/v1/embeddings", json={"model": "served", "input": "x"})
    assert reply.status_code == 503 and "library" in reply.json()["error"]["message"]
