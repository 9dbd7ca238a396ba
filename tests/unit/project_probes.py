"""Every route tried by one project with another project's ids and queries, over HTTP: written
once for the app on stand-ins (`test_gateway_projects`) and the real server
(`tests/integration/test_projects`). Clients are httpx clients (TestClient is one) carrying
their project's key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

SECRET_TEXT = "The sea pump shows fault F-2291 when its valve sticks in the cold sea."
SECRET_WORDS = ("F-2291", "valve sticks")
QUERY = "sea pump fault F-2291 valve"
DOCUMENT_TEXT = "Harbour crane H-77 needs its brake pads checked every spring tide at sea."


@dataclass(frozen=True)
class Owned:
    """What the owning project made: one of each object."""

    file_id: str
    store_id: str
    batch_id: str
    document_id: str


def make_objects(owner: httpx.Client, document_id: str = "crane-manual") -> Owned:
    """An uploaded file in a vector store (and a batch of it), and a library document."""
    upload = {"file": ("pump.txt", SECRET_TEXT.encode(), "text/plain")}
    reply = owner.post("/v1/files", files=upload, data={"purpose": "assistants"})
    assert reply.status_code == 200, reply.text
    file_id = reply.json()["id"]
    reply = owner.post("/v1/vector_stores", json={"name": "secret", "file_ids": [file_id]})
    assert reply.status_code == 200, reply.text
    store_id = reply.json()["id"]
    reply = owner.post(f"/v1/vector_stores/{store_id}/file_batches", json={"file_ids": [file_id]})
    assert reply.status_code == 200, reply.text
    batch_id = reply.json()["id"]
    documents = {"documents": [{"id": document_id, "text": DOCUMENT_TEXT}]}
    reply = owner.post("/v1/documents", json=documents)
    assert reply.status_code == 200, reply.text
    return Owned(file_id, store_id, batch_id, document_id)


def foreign_id_requests(owned: Owned) -> list[tuple[str, str, Any]]:
    """(method, path, JSON body) of every request naming one of `owned`'s ids."""
    store = f"/v1/vector_stores/{owned.store_id}"
    store_file = f"{store}/files/{owned.file_id}"
    batch = f"{store}/file_batches/{owned.batch_id}"
    return [
        ("GET", f"/v1/files/{owned.file_id}", None),
        ("GET", f"/v1/files/{owned.file_id}/content", None),
        ("DELETE", f"/v1/files/{owned.file_id}", None),
        ("GET", store, None),
        ("POST", store, {"name": "taken"}),
        ("DELETE", store, None),
        ("POST", f"{store}/search", {"query": QUERY}),
        ("POST", f"{store}/files", {"file_id": owned.file_id}),
        ("GET", f"{store}/files", None),
        ("GET", store_file, None),
        ("POST", store_file, {"attributes": {"k": "v"}}),
        ("DELETE", store_file, None),
        ("POST", f"{store}/file_batches", {"file_ids": [owned.file_id]}),
        ("GET", batch, None),
        ("POST", f"{batch}/cancel", None),
        ("GET", f"{batch}/files", None),
        ("GET", f"/v1/documents/{owned.document_id}", None),
        ("DELETE", f"/v1/documents/{owned.document_id}", None),
    ]


def assert_not_found(reply: httpx.Response) -> None:
    """A 404 in OpenAI's error shape that carries none of the other project's text."""
    assert reply.status_code == 404, (reply.request.url, reply.text)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert not any(word in reply.text for word in SECRET_WORDS)


def assert_nothing_leaks(other: httpx.Client, owned: Owned, model: str) -> None:
    """`other` (another project's client) sees, finds and changes nothing of `owned`."""
    for method, path, body in foreign_id_requests(owned):
        assert_not_found(other.request(method, path, json=body))
    for path in ("/v1/files", "/v1/vector_stores", "/v1/documents"):
        reply = other.get(path)
        assert reply.status_code == 200, reply.text
        assert reply.json()["data"] == [], (path, reply.text)
    reply = other.post("/v1/vector_stores", json={"name": "own"})
    assert reply.status_code == 200, reply.text
    own = reply.json()["id"]
    assert_not_found(other.post(f"/v1/vector_stores/{own}/files", json={"file_id": owned.file_id}))
    assert_not_found(
        other.post("/v1/vector_stores", json={"name": "x", "file_ids": [owned.file_id]})
    )
    reply = other.post(f"/v1/vector_stores/{own}/search", json={"query": QUERY})
    assert reply.status_code == 200 and reply.json()["data"] == [], reply.text
    tool = {"type": "file_search", "vector_store_ids": [owned.store_id]}
    assert_not_found(
        other.post("/v1/responses", json={"model": model, "input": QUERY, "tools": [tool]})
    )
    reply = other.post("/v1/documents", json={"documents": [{"text": DOCUMENT_TEXT}]})
    assert reply.status_code == 200 and reply.json()["data"][0]["created"], reply.text


def assert_still_owned(owner: httpx.Client, owned: Owned) -> None:
    """Everything `owned` is still there, unchanged, for its own project."""
    assert owner.get(f"/v1/files/{owned.file_id}/content").content == SECRET_TEXT.encode()
    store = owner.get(f"/v1/vector_stores/{owned.store_id}").json()
    assert (store["name"], store["file_counts"]["total"]) == ("secret", 1)
    attached = owner.get(f"/v1/vector_stores/{owned.store_id}/files/{owned.file_id}").json()
    assert attached["attributes"] == {}
    batch = f"/v1/vector_stores/{owned.store_id}/file_batches/{owned.batch_id}"
    assert owner.get(batch).status_code == 200
    assert owner.get(f"/v1/documents/{owned.document_id}").status_code == 200
    found = owner.post(f"/v1/vector_stores/{owned.store_id}/search", json={"query": QUERY})
    assert "F-2291" in found.json()["data"][0]["content"][0]["text"]


OTHER_TEXT = "Lighthouse lamp L-9 is cleaned at dawn when the fog lifts over the bay."


def assert_ids_are_per_project(owner: httpx.Client, other: httpx.Client, owned: Owned) -> None:
    """`other` ingests a document under `owned`'s document id: it is `other`'s own (created,
    read back, a second text under that id is a 409), and deleting it leaves `owned`'s."""
    path = f"/v1/documents/{owned.document_id}"
    for text, status in ((OTHER_TEXT, 200), (OTHER_TEXT, 200), (f"{OTHER_TEXT} Again.", 409)):
        body = {"documents": [{"id": owned.document_id, "text": text}]}
        reply = other.post("/v1/documents", json=body)
        assert reply.status_code == status, reply.text
    assert reply.json()["error"]["param"] == "documents"
    assert owned.document_id in [row["id"] for row in other.get("/v1/documents").json()["data"]]
    for client, text in ((owner, DOCUMENT_TEXT), (other, OTHER_TEXT)):
        document = client.get(path).json()
        assert (document["id"], document["num_chars"]) == (owned.document_id, len(text))
    reply = other.delete(path)
    assert reply.json() == {"id": owned.document_id, "object": "document", "deleted": True}
    assert_not_found(other.get(path))
    assert owner.get(path).json()["num_chars"] == len(DOCUMENT_TEXT)
