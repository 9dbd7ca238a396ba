"""Two replicas on one PostgreSQL library (issue 14): what one replica is told, the other knows.

Servers A and B are the session's replica pair (`replicas` in conftest): separate data dirs and the
same `RAGBLEND_DATABASE_URL`, a throwaway cluster from load_tests/postgres_launcher.py, and the
same Redis chunk-KV tier, which `test_redis_tier.py` tests on the same pair. "Retrievable on B"
means B's own in-memory index finds the document: a `retrieval` request limited to that document
(`document_ids`) cites it only once B's index holds its chunks. Projects alpha and beta have keys
too: what alpha makes on A is alpha's alone on B. The outage test stops PostgreSQL while a large
ingest is in flight and runs last.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from load_tests.postgres_launcher import PostgresServer
from tests.integration.conftest import Server, as_project
from tests.unit import project_probes

pytestmark = pytest.mark.integration

FOLLOW_GUARD_SECONDS = 30.0
"""Hang guard for a change to reach the other replica (the issue's bound, 2 s, is measured by
load_tests/bench_replicas.py, not asserted on a shared test machine)."""
PRECOMPUTE_SECONDS = 300.0


def document(tag: str, sentences: int = 3) -> dict[str, str]:
    lines = (f"The {tag} ledger line {index} is kept in green ink." for index in range(sentences))
    filler = " ".join(lines)
    return {"id": f"doc-{tag}", "text": f"The keeper of the {tag} archive is Ilse {tag}. {filler}"}


def ingest(server: Server, documents: list[dict[str, str]]) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/documents", json={"documents": documents})


def retrieves(server: Server, document_id: str) -> bool:
    """Whether the server's own index returns a chunk of the document for a question about it."""
    tag = document_id.removeprefix("doc-")
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": f"Who keeps the {tag} archive?"}],
        "max_tokens": 1,
        "retrieval": {"top_k": 1, "document_ids": [document_id]},
    }
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return [source["document_id"] for source in reply.json()["retrieval"]] == [document_id]


def wait_until(condition: Any, what: str, guard_s: float = FOLLOW_GUARD_SECONDS) -> float:
    """Seconds until `condition()` held; fails after the hang guard."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < guard_s, f"{what} not within {guard_s:.0f} s"
        time.sleep(0.1)
    return time.monotonic() - start


def status_of(server: Server, document_id: str) -> str | None:
    with server.client() as client:
        reply = client.get(f"/v1/documents/{document_id}")
    return reply.json()["status"] if reply.status_code == 200 else None


def metric(server: Server, family_name: str, sample_suffix: str = "") -> float:
    """The sum of a metric family's samples on the server (those named with `sample_suffix`)."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == family_name
        for sample in family.samples
        if sample.name.endswith(sample_suffix)
    )


def precomputed_chunks(server: Server) -> float:
    """The server's `ragblend_precomputed_chunks_total`, hits and misses together."""
    return metric(server, "ragblend_precomputed_chunks", "_total")


def chat_without_retrieval(server: Server) -> httpx.Response:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 4,
    }
    with server.client() as client:
        return client.post("/v1/chat/completions", json=body)


def test_a_document_ingested_on_a_is_retrieved_on_b(replicas: tuple[Server, Server]) -> None:
    first, second = replicas
    reply = ingest(first, [document("amber")])
    assert reply.status_code == 200, reply.text
    wait_until(lambda: retrieves(second, "doc-amber"), "B retrieving A's document")
    assert status_of(second, "doc-amber") is not None


def test_a_document_deleted_on_b_is_gone_from_a(replicas: tuple[Server, Server]) -> None:
    first, second = replicas
    assert ingest(first, [document("cobalt")]).status_code == 200
    wait_until(lambda: retrieves(second, "doc-cobalt"), "B retrieving A's document")
    with second.client() as client:
        assert client.delete("/v1/documents/doc-cobalt").status_code == 200
    wait_until(lambda: not retrieves(first, "doc-cobalt"), "A forgetting the document")
    assert status_of(first, "doc-cobalt") is None


def test_each_new_chunk_is_precomputed_once_across_both_replicas(
    replicas: tuple[Server, Server],
) -> None:
    # Earlier tests' chunks are precomputed once their ingests are over and a quiet second has
    # passed: counted before this test's, not among them.
    wait_until(
        lambda: metric(replicas[0], "ragblend_precompute_pending_chunks") == 0,
        "earlier documents precomputed",
        PRECOMPUTE_SECONDS,
    )
    before = sum(precomputed_chunks(server) for server in replicas)
    batches = [[document(f"ochre{i}", 40), document(f"slate{i}", 40)] for i in range(3)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        replies = list(pool.map(ingest, [replicas[i % 2] for i in range(3)], batches))
    assert all(reply.status_code == 200 for reply in replies), [r.text for r in replies]
    results = [result for reply in replies for result in reply.json()["data"]]
    chunks = sum(result["num_chunks"] for result in results)
    assert chunks > len(results), "documents of several chunks each"
    ids = [result["id"] for result in results]
    wait_until(
        lambda: all(status_of(replicas[0], document_id) == "cached" for document_id in ids),
        "every chunk precomputed",
        PRECOMPUTE_SECONDS,
    )
    after = sum(precomputed_chunks(server) for server in replicas)
    assert after - before == chunks, "a chunk was precomputed by both replicas, or by neither"


def test_what_alpha_made_on_a_is_alphas_alone_on_b(replicas: tuple[Server, Server]) -> None:
    """The isolation probes across replicas: alpha's file, vector store, batch and document made
    on A are 404s, unlisted and never retrieved for beta on B, and all there for alpha on B.
    After the precompute count above: alpha's chunks are precomputed meanwhile."""
    first, second = replicas
    alpha_b, beta_b = as_project(second, "alpha"), as_project(second, "beta")
    with as_project(first, "alpha").client() as alpha:
        owned = project_probes.make_objects(alpha, "doc-teal")
    # B follows the library's changes in order: the document, made last, is found last.
    wait_until(lambda: retrieves(alpha_b, owned.document_id), "alpha retrieving on B")
    assert not retrieves(beta_b, owned.document_id)
    assert status_of(beta_b, owned.document_id) is None
    with beta_b.client() as beta:
        project_probes.assert_nothing_leaks(beta, owned, second.model)
    with alpha_b.client() as alpha, beta_b.client() as beta:
        project_probes.assert_still_owned(alpha, owned)
        project_probes.assert_ids_are_per_project(alpha, beta, owned)
    assert owned.document_id not in library_ids(second)  # nor is it the default project's


def library_ids(server: Server) -> set[str]:
    with server.client() as client:
        page = client.get("/v1/documents", params={"limit": 200}).json()
    assert page["total"] <= 200, "the library outgrew one page"
    return {row["id"] for row in page["data"]}


def ingest_when_back(server: Server, documents: list[dict[str, str]]) -> None:
    """Ingest, retrying while the replica still answers 503 after the database came back."""
    deadline = time.monotonic() + 120
    while (reply := ingest(server, documents)).status_code == 503:
        assert time.monotonic() < deadline, f"refused after the database came back: {reply.text}"
        time.sleep(0.5)
    assert reply.status_code == 200, reply.text


def assert_database_error(reply: httpx.Response) -> None:
    assert reply.status_code == 503, reply.text
    error = reply.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["code"] == "library_unavailable"
    assert error["message"].startswith("document library unavailable: "), error["message"]


def test_postgres_stopped_mid_ingest_then_back(
    replicas: tuple[Server, Server], postgres: PostgresServer
) -> None:
    first, second = replicas
    batch = [document(f"umber{index}", 30) for index in range(120)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        in_flight = pool.submit(ingest, first, batch)
        time.sleep(1)  # the batch has arrived; embedding it takes longer than this
        postgres.stop()
        interrupted = in_flight.result()
    try:
        assert interrupted.status_code in (200, 503), interrupted.text
        if interrupted.status_code == 503:
            assert_database_error(interrupted)
        assert_database_error(ingest(second, [document("while-down")]))
        for server in replicas:  # serving without the library goes on
            assert chat_without_retrieval(server).status_code == 200
    finally:
        postgres.start()

    ingest_when_back(first, [document("after")])
    wait_until(lambda: retrieves(second, "doc-after"), "B retrieving A's document")
    batch_ids = {item["id"] for item in batch}
    for server in replicas:
        stored = library_ids(server) & batch_ids
        # All of the interrupted batch or none of it, and the same on both replicas.
        assert stored == (batch_ids if interrupted.status_code == 200 else set()), server.url
        assert "doc-while-down" not in library_ids(server)
    # Both indexes hold what was stored before, during and after the outage.
    sample = ["doc-amber", "doc-after", *sorted(library_ids(first) & batch_ids)[:3]]
    wait_until(
        lambda: all(retrieves(server, doc_id) for doc_id in sample for server in replicas),
        f"{sample} retrievable on both replicas",
    )
