"""The routes beside the API on the real model: tokenize and detokenize with its tokenizer,
embeddings from the library's MiniLM through the OpenAI SDK, the version, and vLLM's metrics
beside ragblend's on ``/metrics``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from openai import OpenAI

from tests.integration.conftest import MAX_MODEL_LEN, Server
from tests.unit.test_metrics_documented import documented, served

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "Name a primary colour."}]


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def post(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with server.client() as http:
        reply = http.post(path, json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_tokenize_and_detokenize_round_trip(server: Server, tokenizer: Any) -> None:
    text = "Blending cached chunks saves prefill time."
    tokens = post(server, "/tokenize", {"model": server.model, "prompt": text})
    assert tokens["tokens"] == tokenizer.encode(text)
    assert (tokens["count"], tokens["max_model_len"]) == (len(tokens["tokens"]), MAX_MODEL_LEN)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert post(server, "/detokenize", {"model": server.model, "tokens": ids}) == {"prompt": text}


def test_chat_tokens_are_the_prompt_a_chat_completion_counts(
    server: Server, client: OpenAI
) -> None:
    tokens = post(server, "/tokenize", {"model": server.model, "messages": MESSAGES})
    answer = client.chat.completions.create(
        model=server.model, messages=MESSAGES, max_tokens=1, temperature=0
    )
    assert answer.usage is not None and tokens["count"] == answer.usage.prompt_tokens


def test_embeddings_come_from_the_library_s_model(client: OpenAI) -> None:
    texts = [
        "The cat sat on the warm windowsill.",
        "A kitten was sleeping by the sunny window.",
        "Quarterly revenue grew by eight percent.",
    ]
    reply = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    assert reply.model == "all-MiniLM-L6-v2"
    vectors = np.array([item.embedding for item in reply.data])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.2
    assert reply.usage.prompt_tokens > len(texts) * 5


def test_version_names_ragblend_and_vllm(server: Server) -> None:
    with server.client() as http:
        version = http.get("/version").json()
    assert version["version"] != "unknown" and version["vllm_version"].startswith("0.")


def test_metrics_carry_vllm_s_beside_ragblend_s(server: Server, client: OpenAI) -> None:
    client.completions.create(model=server.model, prompt="Hello", max_tokens=2)
    with server.client() as http:
        text = http.get("/metrics").text
    exported = served(text)
    for name, kind in documented("vllm:").items():
        assert exported.get(name) == kind, f"{name}: documented {kind}, served {exported.get(name)}"
    assert f'model_name="{server.model}"' in text
    assert 'ragblend_requests_total{route="/v1/completions",status="200"}' in text
