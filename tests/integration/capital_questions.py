"""The capital question the blending tests ask a real server, over documents given inline."""

from __future__ import annotations

from typing import Any

from gateway.cli.selfcheck import capital_request
from tests.integration.conftest import Server


def ask_capital(
    server: Server,
    country: str,
    documents: list[str],
    mode: str = "blend",
    ratio: float | None = None,
    metric: str | None = None,
) -> dict[str, Any]:
    """The selfcheck's capital question over ``documents``; fails the test unless answered."""
    blend: dict[str, Any] = {"mode": mode}
    if ratio is not None:
        blend["recompute_ratio"] = ratio
    if metric is not None:
        blend["metric"] = metric
    body = capital_request(country, documents, server.model, blend)
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def answer_text(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"]


def first_sentence(reply: dict[str, Any]) -> str:
    """The answer's first sentence: what two exact computations must agree on.

    Greedy decoding of a small model can part a few tokens later on a bf16 near-tie (whether to
    stop after the answer), which the first-token divergence check already bounds.
    """
    return answer_text(reply).split(".")[0]
