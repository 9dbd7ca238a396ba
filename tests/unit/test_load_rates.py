"""Open-loop load: Poisson arrivals, the in-flight bound and the highest sustained rate."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time

import httpx
import pytest

from load_tests.client import LoadPlan, RequestBudget, wait_until_ready
from load_tests.open_loop import DROPPED, poisson_gaps, run_at_rate
from load_tests.rate_sweep import (
    comparison_text,
    highest_sustained_rate,
    parse_rates,
    rate_table,
    rates_document,
    speedup,
)
from load_tests.stats import LoadSummary, RequestRecord, summarize

SSE_BODY = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: [DONE]\n\n'
PLAN = LoadPlan(
    endpoint="chat", model="m", max_tokens=4, prompts=["a", "b", "c"], request_timeout_s=5.0
)


def test_poisson_gaps_are_reproducible_with_mean_one_over_rate() -> None:
    gaps = list(itertools.islice(poisson_gaps(4.0, seed=7), 20_000))
    assert gaps == list(itertools.islice(poisson_gaps(4.0, seed=7), 20_000))
    assert gaps != list(itertools.islice(poisson_gaps(4.0, seed=8), 20_000))
    assert all(gap >= 0 for gap in gaps)
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.03)
    with pytest.raises(ValueError):
        poisson_gaps(0.0, seed=7)


def _client(respond_delay_s: float, seen: list[str], in_flight: list[int]) -> httpx.AsyncClient:
    """A streaming server that answers after a delay, noting prompts and the most open at once."""

    async def respond(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["messages"][0]["content"])
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(respond_delay_s)
        in_flight[0] -= 1
        return httpx.Response(200, content=SSE_BODY)

    transport = httpx.MockTransport(respond)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


async def test_run_at_rate_sends_about_rate_times_duration_requests_without_waiting() -> None:
    seen: list[str] = []
    in_flight = [0, 0]  # now, most at once
    budget = RequestBudget(10_000, deadline=time.perf_counter() + 0.2)
    async with _client(0.05, seen, in_flight) as client:
        records, elapsed_s = await run_at_rate(client, PLAN, 50.0, budget, seed=1)
    assert 3 <= len(records) <= 25
    assert all(record.ok and record.ttft_s is not None for record in records)
    assert seen == [PLAN.prompts[index % 3] for index in range(len(records))]
    assert in_flight[1] > 1
    assert 0.2 <= elapsed_s < 1.0
    assert summarize(records, elapsed_s).requests_ok == len(records)


async def test_run_at_rate_drops_arrivals_beyond_the_in_flight_bound() -> None:
    seen: list[str] = []
    in_flight = [0, 0]
    budget = RequestBudget(10_000, deadline=time.perf_counter() + 0.2)
    async with _client(0.3, seen, in_flight) as client:
        records, _ = await run_at_rate(client, PLAN, 100.0, budget, seed=2, max_in_flight=1)
    assert in_flight[1] == 1
    assert len(seen) == 1
    assert [record.error for record in records].count(DROPPED) == len(records) - 1 > 0
    assert summarize(records, 1.0).errors == {DROPPED: len(records) - 1}


async def test_run_at_rate_stops_at_the_request_count() -> None:
    budget = RequestBudget(5, deadline=time.perf_counter() + 60)
    async with _client(0.0, [], [0, 0]) as client:
        records, elapsed_s = await run_at_rate(client, PLAN, 1000.0, budget, seed=3)
    assert len(records) == 5
    assert elapsed_s < 5


def _summary(p95_ms: float | None, failed: int = 0) -> LoadSummary:
    """A run whose only successful request had a TTFT of ``p95_ms`` (so that is its p95)."""
    ok = [] if p95_ms is None else [RequestRecord(latency_s=1.0, ttft_s=p95_ms / 1000.0)]
    return summarize([*ok, *[RequestRecord(latency_s=1.0, error="503")] * failed], 10.0)


@pytest.mark.parametrize(
    ("sweep", "expected"),
    [
        ({0.5: _summary(500), 1.0: _summary(1500), 2.0: _summary(3000)}, 1.0),
        ({0.5: _summary(2500), 1.0: _summary(1500), 2.0: _summary(5000)}, 1.0),
        ({0.5: _summary(500, failed=1), 1.0: _summary(900), 2.0: _summary(2001)}, 1.0),
        ({0.5: _summary(100), 1.0: _summary(200, failed=2), 4.0: _summary(1999)}, 4.0),
        ({0.5: _summary(2100), 1.0: _summary(None, failed=3)}, None),
        ({0.5: _summary(None)}, None),
        ({}, None),
    ],
)
def test_highest_sustained_rate(sweep: dict[float, LoadSummary], expected: float | None) -> None:
    assert highest_sustained_rate(sweep, p95_target_ms=2000) == expected


def test_speedup_needs_both_modes_to_sustain_a_rate() -> None:
    assert speedup({"blend": 3.0, "full": 1.0}, "blend", "full") == 3.0
    assert speedup({"blend": 3.0, "full": None}, "blend", "full") is None
    assert speedup({"blend": 3.0}, "blend", "full") is None


def test_sweep_report_and_document() -> None:
    sweeps = {
        "full": {0.5: _summary(1800), 1.5: _summary(4000, failed=1)},
        "blend": {0.5: _summary(400), 1.5: _summary(900)},
    }
    text = comparison_text(sweeps, p95_target_ms=2000)
    assert "full: 0.5 req/s" in text
    assert "blend: 1.5 req/s" in text
    assert text.endswith("blend / full: 3.00x")
    document = rates_document(sweeps, p95_target_ms=2000)
    assert document["highest_sustained_rate_per_s"] == {"full": 0.5, "blend": 1.5}
    assert document["blend_over_full"] == 3.0
    full_runs = document["runs"]["full"]
    assert [run["rate_per_s"] for run in full_runs] == [0.5, 1.5]
    assert [run["sustained"] for run in full_runs] == [True, False]
    assert full_runs[1]["errors"] == {"503": 1}
    lines = rate_table(sweeps["full"], p95_target_ms=2000).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[2].startswith("0.5") and lines[2].endswith("yes")
    assert "503:1" in lines[3] and lines[3].endswith("no")


def test_parse_rates_sorts_and_rejects_bad_lists() -> None:
    assert parse_rates("2,0.5,1,1") == [0.5, 1.0, 2.0]
    for text in ("1,x", "0,1", "-1", "inf"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rates(text)


def _health_client(statuses: list[int]) -> httpx.AsyncClient:
    """A server whose ``/health`` answers the given statuses in turn, then keeps the last."""

    def respond(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/health"
        return httpx.Response(statuses.pop(0) if len(statuses) > 1 else statuses[0])

    return httpx.AsyncClient(transport=httpx.MockTransport(respond), base_url="http://x")


async def test_wait_until_ready_polls_until_the_server_is_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    statuses = [503, 503, 200]
    async with _health_client(statuses) as client:
        await wait_until_ready(client, timeout_s=60)
    assert statuses == [200]


async def test_wait_until_ready_gives_up_after_the_timeout() -> None:
    async with _health_client([503]) as client:
        with pytest.raises(TimeoutError, match="not ready"):
            await wait_until_ready(client, timeout_s=0)


async def _no_sleep(_seconds: float) -> None:
    return None
