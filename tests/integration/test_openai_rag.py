"""OpenAI's own RAG flow, as OpenAI's docs show it, with the real OpenAI SDK against the real
server: upload, vector store, poll, search, ``responses.create`` with ``file_search`` (plain and
streamed), continued conversations, filters, pages, deletion and bad input."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass

import openai
import pytest
from openai import OpenAI
from openai.types import FileObject, VectorStore

from tests.integration.conftest import MAX_DOCUMENT_BYTES, Server

pytestmark = pytest.mark.integration

LIGHTHOUSE = (
    "The Zephyr lighthouse on Corran Island was built in 1871 by the engineer Mara Voss. "
    "Its lamp can be seen 22 nautical miles out to sea, and its keeper rings a bell at dusk."
)
ORCHARD = (
    "The Pellworth orchard grows forty varieties of pear. Its founder, Tomas Hale, planted the "
    "first tree in 1902, and the harvest fair is held every October."
)


@dataclass(frozen=True)
class Library:
    store: VectorStore
    lighthouse: FileObject
    orchard_id: str


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


@pytest.fixture(scope="module")
def library(client: OpenAI) -> Iterator[Library]:
    """Built as OpenAI's file_search guide does: files.create, vector_stores.create,
    vector_stores.files.upload_and_poll (and create_and_poll for an uploaded file)."""
    lighthouse = client.files.create(
        file=("zephyr.md", io.BytesIO(LIGHTHOUSE.encode())), purpose="assistants"
    )
    store = client.vector_stores.create(name="coast guide", metadata={"region": "north"})
    orchard = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id,
        file=("orchard.txt", io.BytesIO(ORCHARD.encode())),
        attributes={"kind": "farm", "year": 1902},
    )
    attached = client.vector_stores.files.create_and_poll(
        file_id=lighthouse.id, vector_store_id=store.id, attributes={"kind": "sea", "year": 1871}
    )
    assert (orchard.status, attached.status, attached.last_error) == (
        "completed",
        "completed",
        None,
    )
    yield Library(store, lighthouse, orchard.id)
    for file_id in (lighthouse.id, orchard.id):
        with contextlib.suppress(openai.NotFoundError):  # a test deleted it already
            client.files.delete(file_id)
    client.vector_stores.delete(store.id)


def _ask(client: OpenAI, server: Server, library: Library, question: str, **extra):
    return client.responses.create(
        model=server.model,
        input=question,
        tools=[{"type": "file_search", "vector_store_ids": [library.store.id]}],
        max_output_tokens=24,
        temperature=0,
        **extra,
    )


def _wait_until_cached(client: OpenAI, library: Library) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = client.vector_stores.files.list(vector_store_id=library.store.id)
        if all(file.model_extra["ragblend"]["document_status"] == "cached" for file in files):
            return
        time.sleep(0.2)
    raise AssertionError("the files' chunk KV was never stored")


def test_search_ranks_the_file_that_answers_first(client: OpenAI, library: Library) -> None:
    results = list(
        client.vector_stores.search(
            vector_store_id=library.store.id, query="Who built the Zephyr lighthouse?"
        )
    )
    assert [r.filename for r in results] == ["zephyr.md", "orchard.txt"]
    assert results[0].file_id == library.lighthouse.id
    assert results[0].attributes == {"kind": "sea", "year": 1871}
    assert "Mara Voss" in results[0].content[0].text
    assert results[0].score > results[1].score


def test_ranking_options_reach_search_and_file_search(
    client: OpenAI, server: Server, library: Library
) -> None:
    """Keyword ranking alone (OpenAI's hybrid_search weights) returns only the file that holds
    the words, in vector store search and in the file_search tool alike."""
    keywords = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
    results = client.vector_stores.search(
        vector_store_id=library.store.id,
        query="Tomas Hale",
        ranking_options=keywords,  # type: ignore[typeddict-unknown-key]
    )
    assert [r.filename for r in results] == ["orchard.txt"]
    both = {"hybrid_search": {"embedding_weight": 1, "text_weight": 1}}
    hybrid = client.vector_stores.search(
        vector_store_id=library.store.id,
        query="Tomas Hale",
        ranking_options=both,  # type: ignore[typeddict-unknown-key]
    )
    assert next(r.filename for r in hybrid) == "orchard.txt"
    assert all(0 < r.score <= 1 for r in hybrid)
    tool = {
        "type": "file_search",
        "vector_store_ids": [library.store.id],
        "ranking_options": keywords,
    }
    reply = client.responses.create(
        model=server.model,
        input="Tomas Hale",
        tools=[tool],  # type: ignore[list-item]
        include=["file_search_call.results"],
        max_output_tokens=4,
        temperature=0,
    )
    call = next(item for item in reply.output if item.type == "file_search_call")
    assert [result.filename for result in call.results or []] == ["orchard.txt"]


def test_file_search_answers_cites_and_reuses_chunk_kv(
    client: OpenAI, server: Server, library: Library
) -> None:
    first = _ask(
        client,
        server,
        library,
        "Who built the Zephyr lighthouse?",
        include=["file_search_call.results"],
    )
    search, message = first.output
    assert search.type == "file_search_call" and search.status == "completed"
    assert search.queries == ["Who built the Zephyr lighthouse?"]
    assert search.results[0].file_id == library.lighthouse.id
    assert first.output_text.strip()
    cited = [annotation.file_id for annotation in message.content[0].annotations]
    assert cited[0] == library.lighthouse.id
    assert (
        first.model_extra["blend"]["chunks_hit"] + first.model_extra["blend"]["chunks_missed"] == 2
    )
    _wait_until_cached(client, library)
    second = _ask(client, server, library, "How far out to sea can the Zephyr lamp be seen?")
    assert second.output[0].results is None  # results only when included
    assert second.usage.input_tokens_details.cached_tokens > 0
    assert second.model_extra["blend"]["chunks_hit"] == 2


def test_streaming_sends_openai_typed_events(
    client: OpenAI, server: Server, library: Library
) -> None:
    events = list(_ask(client, server, library, "When was the lighthouse built?", stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.file_search_call.completed" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text and final.output_text == text
    assert final.usage.output_tokens > 0
    assert client.responses.retrieve(final.id).output_text == text


def test_previous_response_id_continues_a_stored_conversation(
    client: OpenAI, server: Server
) -> None:
    first = client.responses.create(
        model=server.model,
        instructions="Answer in one short sentence.",
        input="My name is Ilse. Remember it.",
        max_output_tokens=12,
        temperature=0,
    )
    follow_up = client.responses.create(
        model=server.model,
        input="What is my name?",
        previous_response_id=first.id,
        max_output_tokens=12,
        temperature=0,
    )
    assert follow_up.previous_response_id == first.id
    assert follow_up.usage.input_tokens > first.usage.input_tokens
    unstored = client.responses.create(
        model=server.model, input="Hi", max_output_tokens=4, store=False
    )
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_attribute_filters_and_pages(client: OpenAI, library: Library) -> None:
    farm = client.vector_stores.search(
        vector_store_id=library.store.id,
        query="Who built the Zephyr lighthouse?",
        filters={
            "type": "or",
            "filters": [
                {"type": "eq", "key": "kind", "value": "farm"},
                {"type": "gt", "key": "year", "value": 1950},
            ],
        },
    )
    assert [result.filename for result in farm] == ["orchard.txt"]
    first = client.vector_stores.files.list(vector_store_id=library.store.id, limit=1)
    assert first.has_more and len(first.data) == 1
    walked = [file.id for file in first]  # the SDK follows the cursor to the end
    assert walked == [library.lighthouse.id, library.orchard_id]  # newest first
    ascending = client.vector_stores.files.list(
        vector_store_id=library.store.id, order="asc", after=library.orchard_id
    )
    assert [file.id for file in ascending.data] == [library.lighthouse.id]


def test_a_batch_with_an_unknown_file_attaches_nothing(client: OpenAI, server: Server) -> None:
    store = client.vector_stores.create(name="batch target")
    spare = client.files.create(
        file=("spare.txt", io.BytesIO(b"A spare note.")), purpose="user_data"
    )
    with pytest.raises(openai.NotFoundError, match="file-unknown"):
        client.vector_stores.file_batches.create(
            vector_store_id=store.id, file_ids=[spare.id, "file-unknown"]
        )
    assert client.vector_stores.retrieve(store.id).file_counts.total == 0
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id, file_ids=[spare.id]
    )
    assert (batch.status, batch.file_counts.completed) == ("completed", 1)
    listed = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert [file.id for file in listed] == [spare.id]
    client.files.delete(spare.id)
    assert client.vector_stores.retrieve(store.id).file_counts.total == 0
    client.vector_stores.delete(store.id)
    with server.client() as http:
        assert http.get(f"/v1/documents/{spare.id}").status_code == 404


def test_a_deleted_file_leaves_search_and_store(client: OpenAI, library: Library) -> None:
    client.vector_stores.files.delete(library.orchard_id, vector_store_id=library.store.id)
    assert client.files.retrieve(library.orchard_id).filename == "orchard.txt"  # still uploaded
    assert client.files.content(library.orchard_id).read() == ORCHARD.encode()
    client.files.delete(library.orchard_id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(library.orchard_id)
    results = client.vector_stores.search(vector_store_id=library.store.id, query="pear orchard")
    assert [result.filename for result in results] == ["zephyr.md"]
    assert client.vector_stores.retrieve(library.store.id).file_counts.total == 1


def test_bad_input_gets_openai_errors(client: OpenAI, server: Server) -> None:
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.files.create(file=("a.txt", io.BytesIO(b"text")), purpose="fine-tune")
    with pytest.raises(openai.APIStatusError) as unsupported:
        client.files.create(file=("a.png", io.BytesIO(b"\x89PNG\r\n")), purpose="assistants")
    assert unsupported.value.status_code == 415
    too_large = io.BytesIO(b"x" * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(openai.APIStatusError) as refused:
        client.files.create(file=("big.txt", too_large), purpose="assistants")
    assert refused.value.status_code == 413
    stores = [store.id for store in client.vector_stores.list(limit=100)]
    for call in (
        lambda: client.files.retrieve("file-unknown"),
        lambda: client.vector_stores.retrieve("vs_unknown"),
        lambda: client.vector_stores.create(file_ids=["file-unknown"]),
        lambda: client.vector_stores.search(vector_store_id="vs_unknown", query="x"),
        lambda: client.responses.create(
            model=server.model,
            input="x",
            tools=[{"type": "file_search", "vector_store_ids": ["vs_unknown"]}],
        ),
        lambda: client.responses.create(
            model=server.model, input="x", previous_response_id="resp_unknown"
        ),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [store.id for store in client.vector_stores.list(limit=100)] == stores
