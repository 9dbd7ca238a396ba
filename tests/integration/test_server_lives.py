"""One data directory through three lives of the server, each ended in a way the next must
survive. The first ingests documents (the default project's), cited passages (alpha's) and
passages to rerank (zeta's), then takes a SIGTERM while it answers long requests; the second
finds all of it as it was and is SIGKILLed in the middle of a long ingest; the third holds every
batch the second acknowledged, and is started with the served-model reranker on, which reranks
what the first life stored. One directory for all of it: each start costs tens of seconds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.cited_passages import Citation, checked_citations, ingest_passages
from tests.integration.conftest import Server, as_project, running_server
from tests.integration.killed_ingest import check_kept, kill_mid_ingest
from tests.integration.library_documents import ask, fact, ingest, wait_for_status
from tests.integration.open_requests import Stopped, sigterm_with_open_requests
from tests.integration.reranked_question import DOCUMENTS, ranked_sources

pytestmark = pytest.mark.integration

OWN_SERVER = {"RAGBLEND_SHUTDOWN_TIMEOUT": "3"}
"""The first life's: a shutdown timeout long enough that the open requests are seen to go on
after the signal."""
CITING_PROJECT = "alpha"
"""The cited passages' project: the default project's other documents never compete with them."""
RERANKING_PROJECT = "zeta"
RERANKER = {"RAGBLEND_RERANKER": "served-model"}


@dataclass(frozen=True)
class FirstLife:
    server: Server
    citations: list[list[Citation]]
    stopped: Stopped


@dataclass(frozen=True)
class SecondLife:
    status: str
    """The status of the first life's document, as the second life found it."""
    answer: dict[str, Any]
    """The second life's answer over the first life's document."""
    citations: list[list[Citation]]
    acknowledged: list[list[str]]
    """The batches the second life acknowledged before it was killed."""


@pytest.fixture(scope="module")
def first_life(own_server: Server) -> FirstLife:
    with own_server.client() as client:
        ingest(client, {"id": "lilliput", "text": fact("Lilliput", "Mildendo")})
        wait_for_status(client, "lilliput", "cached")
    citing = as_project(own_server, CITING_PROJECT)
    with citing.client() as client:
        ingest_passages(client)
        citations = checked_citations(client, citing)
    with as_project(own_server, RERANKING_PROJECT).client() as client:
        ingest(client, *DOCUMENTS)
    return FirstLife(own_server, citations, sigterm_with_open_requests(own_server))


@pytest.fixture(scope="module")
def second_life(first_life: FirstLife) -> SecondLife:
    with running_server(first_life.server.data_dir) as server:
        with server.client() as client:
            status = client.get("/v1/documents/lilliput").json()["status"]
            answer = ask(client, server, "What is the capital of Lilliput?")
        citing = as_project(server, CITING_PROJECT)
        with citing.client() as client:
            citations = checked_citations(client, citing)
        return SecondLife(status, answer, citations, kill_mid_ingest(server))


@pytest.fixture(scope="module")
def third_life(second_life: SecondLife, first_life: FirstLife) -> Iterator[Server]:
    with running_server(first_life.server.data_dir, RERANKER) as server:
        yield server


def test_sigterm_ends_open_requests_at_the_deadline(first_life: FirstLife) -> None:
    """The open requests run until the deadline, then the stream ends with an error event and
    ``[DONE]``, the waiting request gets a 503, and the server exits; the kept-alive connection
    is still answered just after the signal, and told to close."""
    events = first_life.stopped.events
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2].removeprefix("data: "))["error"]
    assert (error["type"], error["code"]) == ("service_unavailable_error", "server_shutting_down")
    assert len(events) > 3  # tokens kept coming after the signal, until the deadline
    waiting = first_life.stopped.waiting
    assert waiting.status_code == 503
    assert waiting.json()["error"]["code"] == "server_shutting_down"
    stopping = first_life.stopped.stopping
    assert (stopping.status_code, stopping.json()["status"]) == (503, "shutting down")
    assert stopping.headers["connection"] == "close"
    log = first_life.server.log.read_text()
    assert "timeout graceful shutdown exceeded" not in log  # ended by the app, not cut by uvicorn


def test_documents_and_their_chunk_kv_survive_a_restart(second_life: SecondLife) -> None:
    assert second_life.status == "cached"
    sources = second_life.answer["retrieval"]
    assert sources[0]["document_id"] == "lilliput"
    assert second_life.answer["blend"]["chunks_hit"] == len(sources)


def test_filters_choose_the_same_cited_chunks_after_a_restart(
    first_life: FirstLife, second_life: SecondLife
) -> None:
    assert second_life.citations == first_life.citations


def test_every_acknowledged_document_survives_a_kill_mid_ingest(
    second_life: SecondLife, third_life: Server
) -> None:
    with third_life.client() as client:
        check_kept(client, third_life.model, second_life.acknowledged)


def test_a_project_sees_only_its_own_documents_after_both_restarts(third_life: Server) -> None:
    citing = as_project(third_life, CITING_PROJECT)
    with citing.client() as client:
        listed = client.get("/v1/documents", params={"limit": 10}).json()
    assert sorted(document["id"] for document in listed["data"]) == ["bare", "ruritania", "zembla"]
    with third_life.client() as client:
        assert client.get("/v1/documents/lilliput").json()["status"] == "cached"


def test_chat_retrieval_is_reranked_by_the_served_model(third_life: Server) -> None:
    """``retrieval`` comes back reordered by the reranker, with its scores, unless the request's
    ``ranking_options.ranker`` says ``none``; asking for it by name is served too."""
    reranking = as_project(third_life, RERANKING_PROJECT)
    with reranking.client() as client:
        plain = ranked_sources(client, reranking, {"ranker": "none"})
        reranked = ranked_sources(client, reranking, {})
        assert ranked_sources(client, reranking, {"ranker": "served-model"}) == reranked
    assert reranked[0][0] == "pump"
    scores = [score for _, score in reranked]
    assert 1 >= scores[0] >= scores[1] >= scores[2] > 0
    assert scores != [score for _, score in plain]  # the reranker's, not the cosine
