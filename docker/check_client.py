"""What the deployment checks share (smoke_check and scale_check for Docker, k8s_check for
Kubernetes): one failure type, waiting for a server to be ready and for a document to be cached,
and the two questions they ask, with `documents` and by `retrieval`, each returning the blend
statistics the user would read. The checks run as scripts from this folder, so they import it
as a sibling."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from openai import OpenAI


class CheckFailure(AssertionError):
    """The deployment answered, but not as its users must see it answer."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailure(message)


def wait_ready(
    url: str, timeout_s: float, waiting: Callable[[], str | None] = lambda: None
) -> tuple[dict[str, Any], float]:
    """Poll `url`/health until it reports ready; its body and the seconds waited. `waiting` is
    asked first each time: a reason to wait without asking /health, or None. A body that says
    `failed` (the model did not load) fails at once."""
    start = time.monotonic()
    last = "no answer"
    while time.monotonic() - start < timeout_s:
        reason = waiting()
        if reason is not None:
            last = reason
            time.sleep(1)
            continue
        try:
            reply = httpx.get(f"{url}/health", timeout=5)
            body = reply.json()
            if reply.status_code == 200 and body.get("status") == "ready":
                return body, time.monotonic() - start
            last = f"{reply.status_code} {body}"
            check(body.get("status") != "failed", f"{url}: the model failed to load: {body}")
        except (httpx.HTTPError, ValueError) as exc:
            last = repr(exc)
        time.sleep(2)
    raise CheckFailure(f"{url} not ready after {timeout_s:.0f} s (last: {last})")


def wait_cached(http: httpx.Client, document_id: str, timeout_s: float) -> None:
    """Until the library reports `document_id` with its chunk KV `cached`."""
    deadline = time.monotonic() + timeout_s
    status = "unknown"
    while time.monotonic() < deadline:
        reply = http.get(f"/v1/documents/{document_id}")
        status = reply.json()["status"] if reply.status_code == 200 else str(reply.status_code)
        if status == "cached":
            return
        time.sleep(1)
    raise CheckFailure(f"document {document_id} still {status!r} after {timeout_s:.0f} s")


def blend_of(reply: Any) -> dict[str, Any]:
    return reply.model_extra["blend"]


def ask_with_documents(
    client: OpenAI, model: str, question: str, documents: list[str]
) -> dict[str, Any]:
    """The blend statistics of a chat answer over `documents`."""
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": question}],
        max_tokens=8,
        temperature=0,
        extra_body={"documents": documents},
    )
    return blend_of(reply)


def ask_with_retrieval(
    client: OpenAI, model: str, question: str, max_tokens: int = 8
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sources and blend statistics of a chat answer over the library's top 2 chunks."""
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": question}],
        max_tokens=max_tokens,
        temperature=0,
        extra_body={"retrieval": {"top_k": 2}},
    )
    return reply.model_extra["retrieval"], blend_of(reply)


def cited(
    client: OpenAI, model: str, question: str, document_id: str, timeout_s: float
) -> dict[str, Any]:
    """The blend statistics of a retrieval answer that cites `document_id`, asked until one does
    (a replica's index follows the shared library within moments)."""
    deadline = time.monotonic() + timeout_s
    sources: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        sources, blend = ask_with_retrieval(client, model, question)
        if sources and sources[0]["document_id"] == document_id:
            return blend
        time.sleep(0.5)
    raise CheckFailure(f"{client.base_url} never cited {document_id}: {sources}")
