"""Two projects on one app (a real SQLite library, stand-ins for the engine and the embedder):
every route tried with the other project's ids answers 404 and changes nothing; lists, searches,
chat retrieval and ``previous_response_id`` see only the caller's project; an admin key lists
every project's usage, what it stores and its stored bytes, in ``/v1/projects`` and
``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.openai.protocol import ChatCompletionRequest
from gateway.outputs import Usage
from gateway.serve.chunk_sources import request_chunks
from retriever import STORE_FILE, Library, NewDocument, RagObjects, StoredResponse
from tests.unit import project_probes
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder, ready_app
from tests.unit.tenants import tenant

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
    alpha = state.rag_objects.in_project(tenant("alpha"))
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
        chunks = asyncio.run(
            request_chunks(
                None, fields.retrieval, project_probes.QUERY, state, state.tenant(project)
            )
        )
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
    assert alpha["usage"] | {"stored_bytes": 0} == {
        "requests": 1,
        "prompt_tokens": 100,
        "cached_tokens": 60,
        "completion_tokens": 7,
        "stored_bytes": 0,
    }
    sizes = {"file_bytes": 0, "document_chars": 0, "document_bytes": 0}
    assert alpha["stored"] | sizes == {
        "documents": 2,
        "document_chars": 0,
        "document_bytes": 0,
        "files": 1,
        "file_bytes": 0,
        "vector_stores": 1,
        "responses": 0,
    }
    assert alpha["stored"]["file_bytes"] == len(project_probes.SECRET_TEXT)
    assert listed["beta"]["stored"] == {} and listed["beta"]["usage"]["requests"] == 0
    metrics = as_key(app, "key-b").get("/metrics").text
    assert 'ragblend_project_tokens_total{kind="cached",project="alpha"}' in metrics


def test_stored_bytes_count_document_text_and_files_of_the_configured_projects(app):
    alpha = as_key(app, "key-a")
    text, upload = "Café crème at the quay.", "Zürich pump".encode()
    reply = alpha.post("/v1/documents", json={"documents": [{"id": "menu", "text": text}]})
    assert reply.status_code == 200, reply.text
    reply = alpha.post(
        "/v1/files", files={"file": ("z.txt", upload)}, data={"purpose": "user_data"}
    )
    assert reply.status_code == 200, reply.text
    kept = "kept after its keys were removed"
    app.state.ragblend.library.ingest([NewDocument("left", kept)], tenant=tenant("gone"))
    # The uploaded file is stored twice: its bytes, and its text as a library document.
    documents = len(text.encode()) + len(upload)
    listed = {p["id"]: p for p in as_key(app, "key-ops").get("/v1/projects").json()["data"]}
    assert listed["alpha"]["usage"]["stored_bytes"] == documents + len(upload)
    assert listed["alpha"]["stored"]["document_bytes"] == documents
    assert listed["beta"]["usage"]["stored_bytes"] == 0
    assert listed["gone"]["usage"]["stored_bytes"] == len(kept)
    metrics = alpha.get("/metrics").text
    assert (
        f'ragblend_project_stored_bytes{{kind="documents",project="alpha"}} {documents}' in metrics
    )
    assert f'ragblend_project_stored_bytes{{kind="files",project="alpha"}} {len(upload)}' in metrics
    assert 'ragblend_project_stored_bytes{kind="files",project="beta"} 0' in metrics
    assert 'project="gone"' not in metrics


def test_two_projects_hold_the_same_document_id_and_see_only_the_ids_they_gave(app):
    alpha, beta = as_key(app, "key-a"), as_key(app, "key-b")
    owned = project_probes.make_objects(alpha)
    project_probes.assert_ids_are_per_project(alpha, beta, owned)
    theirs = project_probes.make_objects(beta, owned.document_id)  # beta's own `crane-manual`
    state = app.state.ragblend
    for client, made, project in ((alpha, owned, "alpha"), (beta, theirs, "beta")):
        project_probes.assert_still_owned(client, made)
        store = f"/v1/vector_stores/{made.store_id}"
        attached = client.get(f"{store}/files").json()["data"]
        file_ids = [attachment["ragblend"]["document_id"] for attachment in attached]
        found = client.post(f"{store}/search", json={"query": project_probes.QUERY}).json()["data"]
        listed = [row["id"] for row in client.get("/v1/documents").json()["data"]]
        assert made.document_id in listed
        messages = [{"role": "user", "content": project_probes.DOCUMENT_TEXT}]
        retrieval = {"document_ids": [made.document_id]}
        fields = ChatCompletionRequest(model="served", messages=messages, retrieval=retrieval)
        chunks = asyncio.run(
            request_chunks(
                None, fields.retrieval, project_probes.DOCUMENT_TEXT, state, state.tenant(project)
            )
        )
        assert [source["document_id"] for source in chunks.sources] == [made.document_id]
        assert found[0]["ragblend"]["document_id"] == file_ids[0]
        assert not any("/" in doc_id for doc_id in [*file_ids, *listed]), (file_ids, listed)
