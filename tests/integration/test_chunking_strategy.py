"""``chunking_strategy`` on the real server through the OpenAI SDK: a static strategy is echoed
by the vector store file and its stored chunks have the sizes and overlap claimed (in SmolLM2's
tokens), bad values are 400s naming the field and store nothing, and chat over overlapping
chunks reuses their precomputed KV."""

from __future__ import annotations

import io
import itertools
import sqlite3
import time
from typing import Any

import openai
import pytest
from openai import OpenAI

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

MAX_TOKENS, OVERLAP = 120, 40
STATIC = {"max_chunk_size_tokens": MAX_TOKENS, "chunk_overlap_tokens": OVERLAP}
WAIT_SECONDS = 600  # a loaded 2-core machine precomputes a chunk in several seconds


def _guide(paragraphs: int = 8) -> str:
    """Paragraphs on made-up lighthouses, about 85 tokens each."""
    return "\n\n".join(
        f"The lighthouse at Cape {cape} was lit in {1850 + 7 * n}. Its keeper, {keeper}, climbs "
        f"{90 + n} steps each evening. The lamp burns {oil} and can be seen {12 + n} miles out. "
        f"Ships bound for {port} steer by it when the fog rolls in from the north."
        for n, (cape, keeper, oil, port) in enumerate(
            [
                ("Arden", "Ilse Marr", "whale oil", "Velmont"),
                ("Brisk", "Otto Fenn", "colza oil", "Rasby"),
                ("Corran", "Mara Voss", "paraffin", "Dunhollow"),
                ("Dray", "Piet Aldo", "kerosene", "Saltmere"),
                ("Ebb", "Hana Lusk", "acetylene gas", "Northwick"),
                ("Fallow", "Jon Reeve", "mineral oil", "Garth"),
                ("Gull", "Tove Brand", "lard oil", "Pennick"),
                ("Hale", "Ruth Acre", "electric light", "Oxmouth"),
            ][:paragraphs]
        )
    )


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def _upload(client: OpenAI, name: str, text: str) -> str:
    return client.files.create(file=(name, io.BytesIO(text.encode())), purpose="assistants").id


def _stored_chunks(server: Server, document_id: str) -> list[tuple[str, list[int]]]:
    """The document's chunks as the library stored them (text, token ids), in order."""
    import numpy as np

    (database,) = server.data_dir.rglob("documents.sqlite3")
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT text, token_ids FROM chunks WHERE document_id = ? ORDER BY chunk_index",
            (document_id,),
        ).fetchall()
    return [(text, np.frombuffer(ids, dtype="<i4").tolist()) for text, ids in rows]


def _shared_tokens(before: str, after: str, tokenizer: Any) -> int:
    """Tokens of the longest text that ends `before` and starts `after`."""
    for size in range(min(len(before), len(after)), 0, -1):
        if before.endswith(after[:size]):
            return len(tokenizer.encode(after[:size].strip(), add_special_tokens=False))
    return 0


def _document_total(server: Server) -> int:
    with server.client() as http:
        return http.get("/v1/documents", params={"limit": 1}).json()["total"]


def test_a_static_strategy_is_echoed_and_cuts_the_chunks_it_claims(
    client: OpenAI, server: Server, tokenizer: Any
) -> None:
    file_id = _upload(client, "lighthouses.md", _guide())
    store = client.vector_stores.create(name="static chunks")
    attached = client.vector_stores.files.create(
        vector_store_id=store.id,
        file_id=file_id,
        chunking_strategy={"type": "static", "static": STATIC},
    )
    assert attached.chunking_strategy.type == "static"
    assert attached.chunking_strategy.static.model_dump() == STATIC
    retrieved = client.vector_stores.files.retrieve(file_id, vector_store_id=store.id)
    assert retrieved.chunking_strategy.static.model_dump() == STATIC

    document_id = attached.model_extra["ragblend"]["document_id"]
    chunks = _stored_chunks(server, document_id)
    assert len(chunks) == attached.model_extra["ragblend"]["num_chunks"] > 4
    for text, token_ids in chunks:
        assert token_ids == tokenizer.encode(text, add_special_tokens=False)
        assert len(token_ids) <= MAX_TOKENS
    shared = [_shared_tokens(a[0], b[0], tokenizer) for a, b in itertools.pairwise(chunks)]
    # each chunk starts with up to the overlap ending the one before, cut at a word
    assert all(OVERLAP - 6 <= tokens <= OVERLAP for tokens in shared), shared
    # the file's text chunked the default way is gone with the re-chunk (nothing else used it)
    with server.client() as http:
        assert http.get(f"/v1/documents/{file_id}").status_code == 404

    auto = client.vector_stores.create(name="auto chunks")
    plain_id = _upload(client, "plain.md", "A short note about the Arden lighthouse.")
    plain = client.vector_stores.files.create(
        vector_store_id=auto.id, file_id=plain_id, chunking_strategy={"type": "auto"}
    )
    # auto is the server's default chunking: RAGBLEND_CHUNK_TOKENS (384), no overlap
    assert plain.chunking_strategy.static.model_dump() == {
        "max_chunk_size_tokens": 384,
        "chunk_overlap_tokens": 0,
    }
    # one file, one chunking: a file in a store chunked one way is not re-chunked for another
    with pytest.raises(openai.BadRequestError) as refused:
        client.vector_stores.files.create(
            vector_store_id=auto.id, file_id=file_id, chunking_strategy={"type": "auto"}
        )
    assert refused.value.body["param"] == "chunking_strategy"
    assert client.vector_stores.files.list(vector_store_id=auto.id).data[0].id == plain_id


@pytest.mark.parametrize(
    ("strategy", "param"),
    [
        (
            {"type": "static", "static": {**STATIC, "max_chunk_size_tokens": 99}},
            "chunking_strategy.static.max_chunk_size_tokens",
        ),
        (
            {"type": "static", "static": {**STATIC, "max_chunk_size_tokens": 4097}},
            "chunking_strategy.static.max_chunk_size_tokens",
        ),
        (
            {"type": "static", "static": {**STATIC, "chunk_overlap_tokens": 61}},
            "chunking_strategy.static.chunk_overlap_tokens",
        ),
        (
            {"type": "static", "static": {**STATIC, "chunk_overlap_tokens": -1}},
            "chunking_strategy.static.chunk_overlap_tokens",
        ),
        ({"type": "static"}, "chunking_strategy.static"),
        ({"type": "semantic"}, "chunking_strategy.type"),
    ],
)
def test_bad_values_are_a_400_naming_the_field_and_store_nothing(
    client: OpenAI, server: Server, strategy: dict[str, Any], param: str
) -> None:
    file_id = _upload(client, "bad.md", f"A note filed under {param}.")
    store = client.vector_stores.create(name="refusals")
    documents = _document_total(server)
    attempts = (
        lambda: client.vector_stores.files.create(
            vector_store_id=store.id, file_id=file_id, chunking_strategy=strategy
        ),
        lambda: client.vector_stores.file_batches.create(
            vector_store_id=store.id, file_ids=[file_id], chunking_strategy=strategy
        ),
        lambda: client.vector_stores.create(file_ids=[file_id], chunking_strategy=strategy),
    )
    stores = client.vector_stores.list(limit=100).data
    for attempt in attempts:
        with pytest.raises(openai.BadRequestError) as refused:
            attempt()
        assert refused.value.body["param"] == param
    assert client.vector_stores.files.list(vector_store_id=store.id).data == []
    assert client.vector_stores.list(limit=100).data == stores
    assert _document_total(server) == documents


def test_chat_over_overlapping_chunks_reuses_their_kv(client: OpenAI, server: Server) -> None:
    file_id = _upload(client, "capes.md", _guide(4).replace("Cape", "Point"))
    store = client.vector_stores.create(name="overlap reuse")
    attached = client.vector_stores.files.create_and_poll(
        vector_store_id=store.id,
        file_id=file_id,
        chunking_strategy={"type": "static", "static": STATIC},
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while (
        client.vector_stores.files.retrieve(file_id, vector_store_id=store.id).model_extra[
            "ragblend"
        ]["document_status"]
        != "cached"
    ):
        assert time.monotonic() < deadline, "the overlapping chunks' KV was never stored"
        time.sleep(0.5)
    document_id = attached.model_extra["ragblend"]["document_id"]
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Who keeps the lighthouse at Point Corran?"}],
        "retrieval": {"top_k": 3, "document_ids": [document_id]},
        "max_tokens": 12,
        "temperature": 0,
    }
    with server.client() as http:
        first = http.post("/v1/chat/completions", json=body).json()
        second = http.post("/v1/chat/completions", json=body).json()
    indices = sorted(source["chunk_index"] for source in second["retrieval"])
    assert len(indices) == 3
    assert any(b - a == 1 for a, b in itertools.pairwise(indices)), indices  # chunks that overlap
    assert first["blend"]["chunks_hit"] + first["blend"]["chunks_missed"] == 3
    assert (second["blend"]["chunks_hit"], second["blend"]["chunks_missed"]) == (3, 0)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_documents_take_a_chunking_strategy_and_report_it(server: Server, tokenizer: Any) -> None:
    text = _guide().replace("Cape", "Mount")
    strategy = {
        "type": "static",
        "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 30},
    }
    with server.client() as http:
        before = _document_total(server)
        refused = http.post(
            "/v1/documents",
            json={
                "documents": [{"text": text}],
                "chunking_strategy": {
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 51},
                },
            },
        )
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "chunking_strategy.static.chunk_overlap_tokens"
        assert _document_total(server) == before

        static = http.post(
            "/v1/documents", json={"documents": [{"text": text}], "chunking_strategy": strategy}
        ).json()["data"][0]
        plain = http.post("/v1/documents", json={"documents": [{"text": text}]}).json()["data"][0]
        assert static["created"] and plain["created"] and static["id"] != plain["id"]
        assert http.get(f"/v1/documents/{static['id']}").json()["chunking_strategy"] == strategy
        assert http.get(f"/v1/documents/{plain['id']}").json()["chunking_strategy"] == {
            "type": "static",
            "static": {"max_chunk_size_tokens": 384, "chunk_overlap_tokens": 0},
        }
    chunks = _stored_chunks(server, static["id"])
    assert all(len(token_ids) <= 100 for _, token_ids in chunks)
    shared = [_shared_tokens(a[0], b[0], tokenizer) for a, b in itertools.pairwise(chunks)]
    assert all(30 - 6 <= tokens <= 30 for tokens in shared), shared
