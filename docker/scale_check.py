"""Client half of scripts/docker-test.sh's replica check: drive docker/compose.scale.yaml's stack.

Waits until the nginx front and every replica (``--replica`` URLs, reached on the compose network
directly) are ready; ingests a document through the front and waits until it is ``cached``; asks
a ``retrieval`` question on every replica directly, which must cite that document wherever it
was ingested; streams a chat completion through the front, which must arrive as several SSE
events ending in ``[DONE]``; and checks that the front spread plain requests over every replica
(its ``X-Ragblend-Replica`` header). Prints one JSON line of measurements; failures exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import httpx

DOCUMENT_ID = "scale-smoke-keeper"
DOCUMENT = (
    "The ferry captain of Lake Orvel is Maren Tolliver. She has sailed the night crossing "
    "between Orvel and Haskby every winter since the old pier burned down."
)
QUESTION = "Who is the ferry captain of Lake Orvel?"


class ScaleFailure(AssertionError):
    """The stack answered, but not as replicas sharing one library must."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ScaleFailure(message)


def wait_ready(http: httpx.Client, timeout_s: float) -> float:
    start = time.monotonic()
    last = "no answer"
    while time.monotonic() - start < timeout_s:
        try:
            reply = http.get("/health", timeout=5)
            if reply.status_code == 200 and reply.json().get("status") == "ready":
                return time.monotonic() - start
            last = f"{reply.status_code} {reply.text[:200]}"
        except (httpx.HTTPError, ValueError) as exc:
            last = repr(exc)
        time.sleep(2)
    raise ScaleFailure(f"{http.base_url} not ready after {timeout_s:.0f} s (last: {last})")


def wait_cached(http: httpx.Client, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    status = "unknown"
    while time.monotonic() < deadline:
        reply = http.get(f"/v1/documents/{DOCUMENT_ID}")
        status = reply.json()["status"] if reply.status_code == 200 else str(reply.status_code)
        if status == "cached":
            return
        time.sleep(1)
    raise ScaleFailure(f"document still {status!r} after {timeout_s:.0f} s")


def cited_on(http: httpx.Client, model: str, timeout_s: float) -> dict[str, Any]:
    """The blend statistics of a retrieval answer that cites the document, asked until one does."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 8,
        "temperature": 0,
        "retrieval": {"top_k": 2},
    }
    deadline = time.monotonic() + timeout_s
    sources: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        reply = http.post("/v1/chat/completions", json=body)
        check(reply.status_code == 200, f"{http.base_url}: {reply.status_code} {reply.text}")
        sources = reply.json()["retrieval"]
        if sources and sources[0]["document_id"] == DOCUMENT_ID:
            return reply.json()["blend"]
        time.sleep(0.5)
    raise ScaleFailure(f"{http.base_url} never cited {DOCUMENT_ID}: {sources}")


def streamed_through_front(http: httpx.Client, model: str) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count from one to ten in words."}],
        "max_tokens": 24,
        "temperature": 0,
        "stream": True,
    }
    events: list[str] = []
    with http.stream("POST", "/v1/chat/completions", json=body) as reply:
        check(reply.status_code == 200, f"stream: {reply.status_code}")
        content_type = reply.headers.get("content-type", "")
        check(content_type.startswith("text/event-stream"), f"stream type {content_type}")
        replica = reply.headers.get("x-ragblend-replica", "")
        events = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
    check(events[-1:] == ["[DONE]"], f"stream did not end with [DONE]: {events[-3:]}")
    chunks = [json.loads(event) for event in events[:-1]]
    check(len(chunks) >= 3, f"only {len(chunks)} SSE chunks arrived")
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return {"sse_chunks": len(chunks), "replica": replica, "text": text}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the nginx front")
    parser.add_argument("--replica", action="append", required=True, help="a replica's own URL")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--ready-timeout", type=float, default=1200)
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"}
    clients = [httpx.Client(base_url=url, headers=headers, timeout=300) for url in args.replica]
    try:
        with httpx.Client(base_url=args.url, headers=headers, timeout=300) as front:
            ready_s = max(wait_ready(http, args.ready_timeout) for http in [front, *clients])
            model = front.get("/v1/models").json()["data"][0]["id"]
            document = {"id": DOCUMENT_ID, "text": DOCUMENT}
            ingested = front.post("/v1/documents", json={"documents": [document]})
            check(ingested.status_code == 200, f"ingest: {ingested.status_code} {ingested.text}")
            ingested_on = ingested.headers.get("x-ragblend-replica", "")
            wait_cached(front, timeout_s=300)
            blends = {str(http.base_url): cited_on(http, model, 30) for http in clients}
            stream = streamed_through_front(front, model)
            answered_by = {front.get("/v1/models").headers["x-ragblend-replica"] for _ in range(6)}
            check(len(answered_by) == len(clients), f"front used only {sorted(answered_by)}")
    except ScaleFailure as exc:
        print(f"FAILED (replicas): {exc}", file=sys.stderr)
        return 1
    finally:
        for http in clients:
            http.close()
    result = {
        "ready_s": round(ready_s, 1),
        "ingested_on": ingested_on,
        "retrieval_blend": blends,
        "stream": stream,
        "front_replicas": sorted(answered_by),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
