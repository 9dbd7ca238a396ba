"""Two servers sharing one real Redis: chunks cross over, a Redis crash costs only misses.

Servers A and B are the session's replica pair (`replicas` in conftest): separate data dirs (so
neither can see the other's disk tier), the same Redis and the same `RAGBLEND_CHUNK_CACHE_SECRET`,
and one PostgreSQL library, which `test_shared_library.py` tests on the same pair. Their memory
tiers are too small to hold a chunk, so every hit is read from disk or Redis. A server given the
Redis without that secret refuses to start (each would sign with its own and refuse the others'
chunks). Projects alpha and beta have keys too: chunk KV is salted per project in Redis as
everywhere else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.selfcheck import CAPITALS, EXACT_DIVERGENCE, capital_document, divergence
from gateway.cli.selfcheck import first_token_distribution as first_token
from tests.integration.capital_questions import ask_capital, first_sentence
from tests.integration.conftest import (
    REPO,
    TEST_MODEL,
    Server,
    as_project,
    settled_count,
    wait_until_settled,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.integration

DOCUMENTS = [capital_document(country, city) for country, city in CAPITALS.items()]
WRITE_WAIT_SECONDS = 30
RECOVERY_SECONDS = 240


def test_a_server_given_redis_without_a_shared_secret_refuses_to_start(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    environment = {
        name: value for name, value in os.environ.items() if name != "RAGBLEND_CHUNK_CACHE_SECRET"
    }
    environment |= {
        "RAGBLEND_MODEL": TEST_MODEL,
        "RAGBLEND_DATA_DIR": str(tmp_path),
        "RAGBLEND_CHUNK_CACHE_REDIS_URL": redis_server.url,
    }
    with redis_server.client() as client:
        assert client.ping()  # Redis is there: what is refused is the missing secret
    command = [sys.executable, "-m", "gateway.cli.main", "serve"]
    finished = subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 2
    assert "RAGBLEND_CHUNK_CACHE_SECRET is not set" in finished.stderr
    assert "openssl rand -hex 32" in finished.stderr
    assert not (tmp_path / "chunk_kv").exists()  # refused before anything was set up


def ask(
    server: Server, documents: list[str], mode: str = "blend", ratio: float | None = None
) -> dict[str, Any]:
    return ask_capital(server, "Poland", documents, mode, ratio)


def stored_entries(redis_server: RedisServer) -> int:
    with redis_server.client() as client:
        return int(client.dbsize())


def wait_for_entries(redis_server: RedisServer, count: int) -> bool:
    """Whether Redis holds `count` entries within the wait (writes are asynchronous)."""
    deadline = time.monotonic() + WRITE_WAIT_SECONDS
    while stored_entries(redis_server) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def redis_sets(redis_server: RedisServer) -> int:
    with redis_server.client() as client:
        return int(client.info("commandstats").get("cmdstat_set", {}).get("calls", 0))


def ask_first_until_shared(server: Server, redis_server: RedisServer, documents: list[str]) -> Any:
    """`server`'s reply to `documents`, none of them seen before, once Redis holds every chunk as
    the server last wrote it: one SET for each first sighting, then one for each rewrite that
    settling it behind the prefix made (another server reading an entry as it is rewritten
    would find it changed midway, a miss)."""
    sets, queued = redis_sets(redis_server), settled_count(server, "queued")
    reply = ask(server, documents)
    wait_until_settled(server)
    expected = sets + len(documents) + settled_count(server, "queued") - queued
    deadline = time.monotonic() + WRITE_WAIT_SECONDS
    while redis_sets(redis_server) < expected:
        assert time.monotonic() < deadline, "the chunks or their rewrites never reached Redis"
        time.sleep(0.2)
    return reply


def fresh_documents(tag: str) -> list[str]:
    """Documents no server has seen: their chunks are computed, then written to Redis."""
    return [f"[{tag}] {document}" for document in DOCUMENTS[:3]]


def test_a_chunk_computed_by_one_server_is_a_hit_on_the_other(
    replicas: tuple[Server, Server], redis_server: RedisServer
) -> None:
    first, second = replicas
    computed = ask_first_until_shared(first, redis_server, DOCUMENTS)
    assert computed["blend"]["chunks_missed"] == len(DOCUMENTS)
    shared = ask(second, DOCUMENTS, ratio=1.0)
    assert shared["blend"]["chunks_missed"] == 0
    assert shared["blend"]["chunks_hit"] == len(DOCUMENTS)
    assert shared["blend"]["rejected_chunks"] == 0 and not shared["blend"]["fell_back"]
    full = ask(second, DOCUMENTS, mode="full")
    assert first_sentence(shared) == first_sentence(full)
    assert divergence(first_token(full), first_token(shared)) < EXACT_DIVERGENCE
    assert ask(second, DOCUMENTS)["blend"]["chunks_hit"] == len(DOCUMENTS)  # from B's disk now


def test_a_chunk_alpha_cached_on_one_server_is_a_miss_for_beta_on_the_other(
    replicas: tuple[Server, Server], redis_server: RedisServer
) -> None:
    first, second = replicas
    documents = fresh_documents("alpha's")
    computed = ask_first_until_shared(as_project(first, "alpha"), redis_server, documents)
    assert computed["blend"]["chunks_missed"] == len(documents)
    theirs = ask(as_project(second, "beta"), documents)["blend"]
    assert (theirs["chunks_hit"], theirs["chunks_missed"]) == (0, len(documents))
    mine = ask(as_project(second, "alpha"), documents)["blend"]  # from Redis: B never saw them
    assert (mine["chunks_hit"], mine["chunks_missed"]) == (len(documents), 0)


def test_redis_killed_in_a_burst_costs_no_error_and_hits_return_after_a_restart(
    replicas: tuple[Server, Server], redis_server: RedisServer
) -> None:
    # Redis dies once two are answered, with the other six of the burst in flight.
    burst = [fresh_documents(f"burst {index}") for index in range(4)] + [DOCUMENTS] * 4
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [
            pool.submit(ask, replicas[index % 2], documents)
            for index, documents in enumerate(burst)
        ]
        for done, future in enumerate(as_completed(futures)):
            if done == 2:
                redis_server.kill()
            future.result()  # ask() asserts a 200
    assert ask(replicas[1], fresh_documents("while down"))["blend"]["chunks_missed"] == 3

    redis_server.start()  # empty: it lost everything
    deadline = time.monotonic() + RECOVERY_SECONDS
    attempt = 0
    while True:
        documents = fresh_documents(f"after restart {attempt}")
        before = stored_entries(redis_server)
        ask(replicas[0], documents)  # computed by A, written to Redis once A retries it
        if wait_for_entries(redis_server, before + len(documents)):
            reply = ask(replicas[1], documents)
            if reply["blend"]["chunks_missed"] == 0:
                break
        assert time.monotonic() < deadline, "Redis never served a chunk again after its restart"
        attempt += 1
