"""``ragblend query`` and what the commands that talk to a running server share."""

from __future__ import annotations

import json
import sys

import httpx


def connect(url: str, api_key: str | None) -> httpx.Client:
    """A client of the server at ``url``, with the bearer key when there is one."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=600)


def served_model(client: httpx.Client) -> str:
    """The name of the model the server serves."""
    reply = client.get("/v1/models")
    reply.raise_for_status()
    return reply.json()["data"][0]["id"]


def query(url: str, api_key: str | None, question: str, top_k: int | None, mode: str | None) -> int:
    """Ask with retrieval, stream the answer, then list the chunks it was given."""
    with connect(url, api_key) as client:
        model = served_model(client)
        body = {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "retrieval": {} if top_k is None else {"top_k": top_k},
            **({"blend": {"mode": mode}} if mode else {}),
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            if reply.status_code >= 400:
                reply.read()
                print(f"error: {reply.status_code} {error_message(reply)}", file=sys.stderr)
                return 1
            sources = _print_stream(reply)
    print()
    for source in sources:
        print(
            f"  [{source['score']:.3f}] {source['document_id']} chunk {source['chunk_index']}",
            file=sys.stderr,
        )
    return 0


def _print_stream(reply: httpx.Response) -> list[dict]:
    sources: list[dict] = []
    for line in reply.iter_lines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[len("data: ") :])
        for choice in event.get("choices", []):
            print(choice["delta"].get("content") or "", end="", flush=True)
        sources = event.get("retrieval", sources)
    return sources


def error_message(reply: httpx.Response) -> str:
    try:
        return reply.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return reply.text[:200]
