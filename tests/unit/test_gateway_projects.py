"""Two projects on one app (a real SQLite library, stand-ins for the engine and the embedder):
every route tried with the other project's ids answers 404 and changes nothing; lists, searches,
chat retrieval and ``previous_response_id`` see only the caller's project; an admin key lists
every project's usage and what it stores, in ``/v1/projects`` and ``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.openai.protocol import ChatCompletionRequest
from gateway.rag.generation import Usage
from gateway.rag.retrieval import request_chunks
from retriever import STORE_FILE, Library, RagObjects, StoredResponse
from tests.unit import project_probes
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder, ready_app

KEYS = "key-a:alpha,key-b:beta,key-d,key-ops:ops:admin"


@pytest.fixture
def app(tmp_path) -> Iterator[Any]:
    app = ready_app(data_dir=tmp_path, api_keys=KEYS)
    state = app.state.ragblend
    state.library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    state.rag_objects = RagObjects(tmp_path / "library" / STORE_FILE)
    yield app
    state.rag_objects.close()
    state.library.close()


def as_key(app: Any, key: str) -> TestClient:
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


def test_another_projects_ids_are_404s_and_change_nothing(app):
    alpha, beta = as_key(app, "key-a"), as_key(app, "key-b")
    owned = project_probes.make_objects(alpha)
    project_probes.assert_nothing_leaks(beta, owned, "served")
    project_probes.assert_nothing_leaks(as_key(app, "key-d"), owned, "served")
    project_probes.assert_still_owned(alpha, owned)


def test_a_stored_response_is_only_continued_by_its_project(app):
    state = app.state.ragblend
    alpha = state.rag_objects.in_project("alpha")
    alpha.responses.save(StoredResponse("resp_a", {"id": "resp_a"}, [{"role": "user"}]))
    beta = as_key(app, "key-b")
    project_probes.assert_not_found(beta.get("/v1/responses/resp_a"))
    project_probes.assert_not_found(beta.delete("/v1/responses/resp_a"))
    body = {"model": "served", "input": "hi", "previous_response_id": "resp_a"}
    project_probes.assert_not_found(beta.post("/v1/responses", json=body))
    assert as_key(app, "key-a").get("/v1/responses/resp_a").json() == {"id": "resp_a"}


def test_chat_retrieval_searches_only_the_callers_project(app):
    alpha = as_key(app, "key-a")
    project_probes.make_objects(alpha)
    state = app.state.ragblend
    messages = [{"role": "user", "content": project_probes.QUERY}]
    fields = ChatCompletionRequest(model="served", messages=messages, retrieval={})
    for project, expected in (("beta", None), ("default", None), ("alpha", "F-2291")):
        chunks = asyncio.run(request_chunks(fields, project_probes.QUERY, state, project))
        assert chunks is not None
        texts = " ".join(state.tokenizer.decode(ids) for ids in chunks.token_ids)
        assert (expected in texts) if expected else chunks.sources == [], project


def test_an_admin_key_lists_every_projects_usage_and_storage(app):
    project_probes.make_objects(as_key(app, "key-a"))
    state = app.state.ragblend
    state.usage.record("alpha", Usage(prompt_tokens=100, completion_tokens=7, cached_tokens=60))
    assert as_key(app, "key-a").get("/v1/projects").status_code == 403
    reply = as_key(app, "key-ops").get("/v1/projects")
    assert reply.status_code == 200, reply.text
    listed = {project["id"]: project for project in reply.json()["data"]}
    assert sorted(listed) == ["alpha", "beta", "default", "ops"]
    alpha = listed["alpha"]
    assert alpha["usage"] == {
        "requests": 1,
        "prompt_tokens": 100,
        "cached_tokens": 60,
        "completion_tokens": 7,
    }
    assert alpha["stored"] | {"file_bytes": 0, "document_chars": 0} == {
        "documents": 2,
        "document_chars": 0,
        "files": 1,
        "file_bytes": 0,
        "vector_stores": 1,
        "responses": 0,
    }
    assert alpha["stored"]["file_bytes"] == len(project_probes.SECRET_TEXT)
    assert listed["beta"]["stored"] == {} and listed["beta"]["usage"]["requests"] == 0
    metrics = as_key(app, "key-b").get("/metrics").text
    assert 'ragblend_project_tokens_total{kind="cached",project="alpha"}' in metrics
