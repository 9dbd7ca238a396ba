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
from typing import Any

import httpx
from check_client import CheckFailure, check, cited, wait_cached, wait_ready
from openai import OpenAI

DOCUMENT_ID = "scale-smoke-keeper"
DOCUMENT = (
    "The ferry captain of Lake Orvel is Maren Tolliver. She has sailed the night crossing "
    "between Orvel and Haskby every winter since the old pier burned down."
)
QUESTION = "Who is the ferry captain of Lake Orvel?"


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
    try:
        with httpx.Client(base_url=args.url, headers=headers, timeout=300) as front:
            urls = [args.url, *args.replica]
            ready_s = max(wait_ready(url, args.ready_timeout)[1] for url in urls)
            model = front.get("/v1/models").json()["data"][0]["id"]
            document = {"id": DOCUMENT_ID, "text": DOCUMENT}
            ingested = front.post("/v1/documents", json={"documents": [document]})
            check(ingested.status_code == 200, f"ingest: {ingested.status_code} {ingested.text}")
            ingested_on = ingested.headers.get("x-ragblend-replica", "")
            wait_cached(front, DOCUMENT_ID, timeout_s=300)
            blends = {
                url: cited(
                    OpenAI(base_url=f"{url}/v1", api_key=args.api_key, timeout=300, max_retries=0),
                    model,
                    QUESTION,
                    DOCUMENT_ID,
                    timeout_s=30,
                )
                for url in args.replica
            }
            stream = streamed_through_front(front, model)
            answered_by = {front.get("/v1/models").headers["x-ragblend-replica"] for _ in range(6)}
            check(len(answered_by) == len(args.replica), f"front used only {sorted(answered_by)}")
    except CheckFailure as exc:
        print(f"FAILED (replicas): {exc}", file=sys.stderr)
        return 1
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
