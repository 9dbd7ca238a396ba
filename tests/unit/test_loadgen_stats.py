"""Load generator: statistics, SSE parsing and per-request measurement (no network)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import numpy as np
import pytest

from load_tests.client import LoadPlan, RequestBudget, run_load, stream_request
from load_tests.loadgen import is_loopback_url
from load_tests.report import format_table
from load_tests.sse import (
    MalformedChunkError,
    chunk_completion_tokens,
    chunk_has_error,
    chunk_text,
    decode_chunk,
    parse_sse_data,
)
from load_tests.stats import RequestRecord, mean, percentile, rate, summarize


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 95, 3.85),
        ([5.0, 1.0, 4.0, 2.0, 3.0], 0, 1.0),
        ([5.0, 1.0, 4.0, 2.0, 3.0], 100, 5.0),
        ([7.0], 99, 7.0),
    ],
)
def test_percentile_interpolates_between_closest_ranks(
    values: list[float], percent: float, expected: float
) -> None:
    assert percentile(values, percent) == pytest.approx(expected)


def test_percentile_matches_numpy_default_method() -> None:
    values = [float(v) for v in np.random.default_rng(7).exponential(size=101)]
    for percent in (1, 50, 95, 99):
        assert percentile(values, percent) == pytest.approx(np.percentile(values, percent))


@pytest.mark.parametrize(("values", "percent"), [([], 50), ([1.0], -1), ([1.0], 100.5)])
def test_percentile_rejects_undefined_requests(values: list[float], percent: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, percent)


def test_mean_and_rate() -> None:
    assert mean([1.0, 2.0, 6.0]) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        mean([])
    assert rate(10, 4.0) == pytest.approx(2.5)
    assert rate(10, 0.0) == 0.0


def test_summarize_counts_only_successful_requests_in_latency_figures() -> None:
    records = [
        RequestRecord(latency_s=1.0, ttft_s=0.1, output_tokens=10),
        RequestRecord(latency_s=3.0, ttft_s=0.3, output_tokens=30),
        RequestRecord(latency_s=2.0, ttft_s=None, output_tokens=0),
        RequestRecord(latency_s=9.0, error="503"),
        RequestRecord(latency_s=0.5, error="ConnectError"),
        RequestRecord(latency_s=9.0, error="503"),
    ]
    summary = summarize(records, elapsed_s=4.0)
    assert (summary.requests_total, summary.requests_ok, summary.requests_failed) == (6, 3, 3)
    assert summary.ok_requests_per_s == pytest.approx(0.75)
    assert summary.output_tokens_total == 40
    assert summary.output_tokens_per_s == pytest.approx(10.0)
    assert summary.ttft_p50_ms == pytest.approx(200.0)
    assert summary.ttft_p99_ms == pytest.approx(298.0)
    assert summary.latency_mean_ms == pytest.approx(2000.0)
    assert list(summary.errors.items()) == [("503", 2), ("ConnectError", 1)]


def test_summarize_without_successes_reports_no_latency() -> None:
    summary = summarize([RequestRecord(latency_s=0.1, error="401")], elapsed_s=1.0)
    assert summary.ttft_p50_ms is None
    assert summary.latency_mean_ms is None
    assert summary.errors == {"401": 1}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('data: {"a": 1}', '{"a": 1}'),
        ('data:{"a": 1}', '{"a": 1}'),
        ("data:  two spaces", " two spaces"),
        ("data: [DONE]", "[DONE]"),
        ("", None),
        (": keep-alive comment", None),
        ("event: message", None),
    ],
)
def test_parse_sse_data(line: str, expected: str | None) -> None:
    assert parse_sse_data(line) == expected


@pytest.mark.parametrize("payload", ["not json", "[1, 2]"])
def test_decode_chunk_rejects_non_objects(payload: str) -> None:
    with pytest.raises(MalformedChunkError):
        decode_chunk(payload)


def test_chunk_fields_for_both_endpoints() -> None:
    completion = {"choices": [{"index": 0, "text": "def"}]}
    chat = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    role_only = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 12}}
    assert chunk_text(completion, "completions") == "def"
    assert chunk_text(chat, "chat") == "Hi"
    assert chunk_text(role_only, "chat") == ""
    assert chunk_text(usage, "chat") == ""
    assert chunk_completion_tokens(usage) == 12
    assert chunk_completion_tokens(chat) is None
    assert chunk_has_error({"error": {"message": "engine died"}})
    assert not chunk_has_error(chat)


def _sse_body(chunks: list[dict[str, object]], done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def _client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler, base_url="http://127.0.0.1:8000")


PLAN = LoadPlan(
    endpoint="completions", model="m", max_tokens=8, prompts=["p"], request_timeout_s=5.0
)
CONTENT = [{"choices": [{"text": ""}]}, {"choices": [{"text": "a"}]}, {"choices": [{"text": "b"}]}]


async def test_stream_request_prefers_reported_usage_and_asks_for_it() -> None:
    sent: list[dict[str, object]] = []

    def respond(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        usage = {"choices": [], "usage": {"completion_tokens": 5}}
        return httpx.Response(200, content=_sse_body([*CONTENT, usage]))

    async with _client(httpx.MockTransport(respond)) as client:
        record = await stream_request(client, PLAN, "p")
    assert record.ok
    assert record.output_tokens == 5
    assert record.ttft_s is not None
    assert record.ttft_s <= record.latency_s
    assert sent[0]["stream"] is True
    assert sent[0]["stream_options"] == {"include_usage": True}


async def test_stream_request_counts_content_chunks_without_usage() -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, content=_sse_body(CONTENT)))
    async with _client(transport) as client:
        record = await stream_request(client, PLAN, "p")
    assert record.ok
    assert record.output_tokens == 2


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(503, json={"error": "not ready"}), "503"),
        (httpx.Response(200, content=_sse_body(CONTENT, done=False)), "incomplete_stream"),
        (httpx.Response(200, content=_sse_body([{"error": {"message": "x"}}])), "stream_error"),
        (httpx.Response(200, content=b"data: {oops\n\n"), "malformed_chunk"),
    ],
)
async def test_stream_request_records_failures(response: httpx.Response, error: str) -> None:
    async with _client(httpx.MockTransport(lambda _: response)) as client:
        record = await stream_request(client, PLAN, "p")
    assert record.error == error


async def test_stream_request_records_transport_errors_by_name() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with _client(httpx.MockTransport(refuse)) as client:
        record = await stream_request(client, PLAN, "p")
    assert record.error == "ConnectError"


def test_request_budget_stops_at_count_or_deadline() -> None:
    budget = RequestBudget(2, deadline=time.perf_counter() + 60)
    assert [budget.take() for _ in range(3)] == [True, True, False]
    assert not RequestBudget(5, deadline=time.perf_counter() - 1).take()


async def test_run_load_stops_by_itself_when_the_budget_is_spent() -> None:
    prompts_seen: list[str] = []
    in_flight = [0, 0]  # now, most at once

    async def respond(request: httpx.Request) -> httpx.Response:
        prompts_seen.append(json.loads(request.content)["prompt"])
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(0.01)
        in_flight[0] -= 1
        return httpx.Response(200, content=_sse_body(CONTENT))

    plan = LoadPlan(
        endpoint="completions",
        model="m",
        max_tokens=8,
        prompts=["a", "b", "c"],
        request_timeout_s=5.0,
    )
    budget = RequestBudget(7, deadline=time.perf_counter() + 60)
    async with _client(httpx.MockTransport(respond)) as client:
        records, elapsed_s = await run_load(client, plan, concurrency=3, budget=budget)
    assert len(records) == 7
    assert all(record.ok for record in records)
    assert elapsed_s > 0
    assert in_flight[1] == 3
    assert set(prompts_seen) == {"a", "b", "c"}


def test_format_table_aligns_columns() -> None:
    lines = format_table([("requests ok", "12"), ("TTFT p50", "85.2 ms")]).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[2].startswith("requests ok")
    assert lines[3].endswith("85.2 ms")


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://127.8.9.10:8000", True),
        ("http://localhost:8000", True),
        ("http://[::1]:8000", True),
        ("http://10.0.0.5:8000", False),
        ("http://example.com", False),
    ],
)
def test_is_loopback_url(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
