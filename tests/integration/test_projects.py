"""Projects on the real server (SQLite library, SmolLM2): every route tried with another
project's ids and queries leaks nothing, and a chunk one project cached is a miss for another
unless both share chunk KV. The shared server's keys name the projects (`PROJECT_KEYS`): gamma
and delta share chunk KV; epsilon and zeta send one request each, so nothing of theirs is cached
before it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.conftest import PROJECT_KEYS, Server
from tests.unit import project_probes

pytestmark = pytest.mark.integration


def client(server: Server, project: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {PROJECT_KEYS[project]}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=300)


def test_every_route_with_another_projects_ids_leaks_nothing(server: Server) -> None:
    with client(server, "alpha") as alpha, client(server, "beta") as beta:
        owned = project_probes.make_objects(alpha)
        project_probes.assert_nothing_leaks(beta, owned, server.model)
        project_probes.assert_still_owned(alpha, owned)
        project_probes.assert_ids_are_per_project(alpha, beta, owned)


def _chat(http: httpx.Client, model: str, **fields: Any) -> dict[str, Any]:
    body = {"model": model, "max_tokens": 1, "temperature": 0, **fields}
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_retrieval_and_stored_responses_stay_in_their_project(server: Server) -> None:
    model = server.model
    with client(server, "alpha") as alpha, client(server, "beta") as beta:
        text = "Boiler B-5 trips its breaker whenever the feed pump P-9 runs dry overnight."
        documents = {"documents": [{"id": "alpha-only", "text": text}]}
        assert alpha.post("/v1/documents", json=documents).status_code == 200
        question = [{"role": "user", "content": "Why does boiler B-5 trip its breaker?"}]
        mine = _chat(alpha, model, messages=question, retrieval={"top_k": 3})
        assert "alpha-only" in {s["document_id"] for s in mine["retrieval"]}
        theirs = _chat(beta, model, messages=question, retrieval={"top_k": 3})
        found = {source["document_id"] for source in theirs["retrieval"]}
        assert "alpha-only" not in found
        stored = alpha.post(
            "/v1/responses",
            json={"model": model, "input": "Hi", "store": True, "max_output_tokens": 2},
        )
        assert stored.status_code == 200, stored.text
        response_id = stored.json()["id"]
        project_probes.assert_not_found(beta.get(f"/v1/responses/{response_id}"))
        follow = {"model": model, "input": "And?", "previous_response_id": response_id}
        project_probes.assert_not_found(beta.post("/v1/responses", json=follow))
        assert alpha.get(f"/v1/responses/{response_id}").status_code == 200


def _blend(server: Server, project: str, documents: list[str]) -> dict[str, Any]:
    with client(server, project) as http:
        messages = [{"role": "user", "content": "Which code does the pump show?"}]
        reply = _chat(
            http, server.model, messages=messages, documents=documents, blend={"mode": "blend"}
        )
    return reply["blend"] | {"cached": reply["usage"]["prompt_tokens_details"]["cached_tokens"]}


def test_a_chunk_one_project_cached_is_a_miss_for_another(server: Server) -> None:
    """The same prompt from another project misses both caches: the chunk store and vLLM's
    prefix cache (``cached`` 0). The owner's reordered chunks all hit (reordered, so vLLM's
    prefix cache cannot serve them instead)."""
    documents = [f"Unit {n}: the pump shows code P-{n}{n} after a cold start." for n in (1, 2)]
    first = _blend(server, "alpha", documents)
    assert first["chunks_missed"] == 2
    other = _blend(server, "epsilon", documents)
    assert (other["chunks_hit"], other["chunks_missed"], other["cached"]) == (0, 2, 0)
    assert _blend(server, "alpha", documents[::-1])["chunks_hit"] == 2


def test_projects_that_share_chunk_kv_hit_each_others_chunks(server: Server) -> None:
    documents = [f"Crane {n} lifts {n} tonnes when the wind is calm." for n in (3, 4)]
    assert _blend(server, "gamma", documents)["chunks_missed"] == 2
    assert _blend(server, "delta", documents[::-1])["chunks_hit"] == 2
    salted = _blend(server, "zeta", documents)
    assert (salted["chunks_hit"], salted["cached"]) == (0, 0)
