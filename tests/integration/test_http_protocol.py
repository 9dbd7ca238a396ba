"""Raw HTTP as curl sends it: SSE framing, errors, health, metrics, overload, disconnects."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest

from tests.integration.conftest import MAX_CONCURRENT, Server

pytestmark = pytest.mark.integration


def _metric(text: str, name: str, **labels: str) -> float:
    selector = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    pattern = rf"^{re.escape(name)}\{{{re.escape(selector)}\}} (\S+)$"
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _metrics(server: Server) -> str:
    return httpx.get(f"{server.url}/metrics").text


def test_health_is_ready_and_open(server: Server) -> None:
    response = httpx.get(f"{server.url}/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_streaming_follows_openai_sse_framing(server: Server) -> None:
    body = {
        "model": server.model,
        "prompt": "Hello",
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with server.client() as client, client.stream("POST", "/v1/completions", json=body) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        raw = "".join(reply.iter_text())
    events = [block for block in raw.split("\n\n") if block]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(event[len("data: ") :]) for event in events[:-1]]
    assert all(payload["object"] == "text_completion" for payload in payloads)
    assert len({payload["id"] for payload in payloads}) == 1
    assert payloads[-1]["usage"]["completion_tokens"] == 5
    assert all(payload["usage"] is None for payload in payloads[:-1])


def test_bad_json_is_400_in_openai_format(server: Server) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "JSON" in error["message"]


def test_missing_field_names_the_parameter(server: Server) -> None:
    with server.client() as client:
        response = client.post("/v1/chat/completions", json={"model": server.model})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages"


def test_missing_api_key_is_401(server: Server) -> None:
    response = httpx.post(f"{server.url}/v1/completions", json={"model": server.model})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_metrics_count_requests_tokens_and_time_to_first_token(server: Server) -> None:
    before = _metrics(server)
    with server.client() as client:
        reply = client.post(
            "/v1/completions", json={"model": server.model, "prompt": "Hi", "max_tokens": 3}
        )
    assert reply.status_code == 200
    after = _metrics(server)
    route = "/v1/completions"
    requests = ("ragblend_requests_total", {"route": route, "status": "200"})
    assert (
        _metric(after, requests[0], **requests[1])
        == _metric(before, requests[0], **requests[1]) + 1
    )
    ttft = "ragblend_time_to_first_token_seconds_count"
    assert _metric(after, ttft, route=route) == _metric(before, ttft, route=route) + 1
    tokens = "ragblend_generation_tokens_total"
    assert _metric(after, tokens, route=route) == _metric(before, tokens, route=route) + 3
    assert _metric(after, "ragblend_requests_in_flight", route=route) == 0


def test_requests_beyond_the_limit_get_429(server: Server) -> None:
    body = {"model": server.model, "prompt": "Count:", "max_tokens": 200, "stream": True}
    statuses: list[int] = []
    started = threading.Barrier(MAX_CONCURRENT + 2)

    def send() -> None:
        with server.client() as client:
            started.wait()
            with client.stream("POST", "/v1/completions", json=body) as reply:
                statuses.append(reply.status_code)
                if reply.status_code == 200:
                    for _ in reply.iter_lines():
                        break

    threads = [threading.Thread(target=send) for _ in range(MAX_CONCURRENT + 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses.count(429) >= 1
    assert statuses.count(200) >= 1


def _disconnect_early(server: Server, route: str, body: dict, stream: bool) -> None:
    if stream:
        with (
            server.client() as client,
            client.stream("POST", route, json={**body, "stream": True}) as reply,
        ):
            for line in reply.iter_lines():
                if line.startswith("data: {"):
                    return
    # A sampled answer may end (EOS) before the client gives up; only a timed-out try disconnects.
    for _ in range(5):
        with server.client() as client:
            try:
                client.post(route, json=body, timeout=1.5)
            except httpx.ReadTimeout:
                return
    pytest.fail("every answer ended before the client could disconnect")


@pytest.mark.parametrize("stream", [True, False])
def test_client_disconnect_cancels_the_generation(server: Server, stream: bool) -> None:
    route = "/v1/completions"
    tokens = "ragblend_generation_tokens_total"
    before = _metric(_metrics(server), tokens, route=route)
    body = {"model": server.model, "prompt": "Tell a long story.", "max_tokens": 1500}
    _disconnect_early(server, route, body, stream)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = _metrics(server)
        if _metric(text, "ragblend_requests_in_flight", route=route) == 0:
            break
        time.sleep(0.2)
    assert _metric(text, "ragblend_requests_in_flight", route=route) == 0
    generated = _metric(text, tokens, route=route) - before
    assert generated < 1500
