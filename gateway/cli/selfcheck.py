"""``ragblend selfcheck``: compare blended answers with full prefill on a running server.

A few synthetic retrieval prompts (shuffled documents, one question each) go through ``full``,
``blend`` at ratio 1.0 (must reproduce full), ``blend`` at the server's default ratio, and
``reuse`` (no recompute, the lower bound); then, when the server has a library, the same
questions over those documents ingested and retrieved (``library@default``: library chunks'
own recipe, ``gateway/cli/selfcheck_library.py``). Reported per mode: how often the greedy answer
equals full's, and the divergence of the first token's distribution from full's. The F1 gap on
real QA data is the evaluation harness's job: ``python -m load_tests.eval.server_gap``.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway.cli.client_commands import connect, served_model
from gateway.cli.selfcheck_library import library_request, selfcheck_documents

CAPITALS = {
    "France": "Paris",
    "Germany": "Berlin",
    "Italy": "Rome",
    "Austria": "Vienna",
    "Portugal": "Lisbon",
    "Poland": "Warsaw",
}
FILLER = "The country has a long history, many rivers and mountains, and a lively culture. "
EXACT_DIVERGENCE = 0.05
"""Ratio 1.0 may differ from full only by rounding (bf16 kernels differ in summation order).
The first token's distribution is the gate: greedy answers of a small model can part a few
tokens later on a near-tie, depending on the CPU's bf16 kernels (seen: 1 of 2 SmolLM2 answers
parting at KL 0.004 on one machine, identical on another), while a broken blend moves the
first token's distribution by far more (reuse: ~0.1)."""

MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("blend@1.0", {"mode": "blend", "recompute_ratio": 1.0}),
    ("blend@default", {"mode": "blend"}),
    ("reuse", {"mode": "reuse"}),
)
LIBRARY_MODE = "library@default"
"""The same questions over the documents ingested, retrieved: their chunks' own recipe."""


def capital_document(country: str, city: str) -> str:
    return f"The capital of {country} is {city}. " + FILLER * 4


def first_token_distribution(reply: dict[str, Any]) -> dict[str, float]:
    first = reply["choices"][0]["logprobs"]["content"][0]
    return {entry["token"]: entry["logprob"] for entry in first["top_logprobs"]}


def divergence(reference: dict[str, float], other: dict[str, float]) -> float:
    """KL(reference || other) over the reference's top tokens; missing ones get a low floor."""
    floor = min(other.values()) - 1
    return sum(
        math.exp(logprob) * (logprob - other.get(token, floor))
        for token, logprob in reference.items()
    )


@dataclass
class ModeReport:
    name: str
    same_answer: int = 0
    divergences: list[float] = field(default_factory=list)

    def add(self, full: dict[str, Any], reply: dict[str, Any]) -> None:
        """One prompt's answer in this mode against full prefill's."""
        self.same_answer += _text(reply) == _text(full)
        self.divergences.append(
            divergence(first_token_distribution(full), first_token_distribution(reply))
        )

    @property
    def mean_divergence(self) -> float:
        return sum(self.divergences) / max(1, len(self.divergences))


def capital_request(
    country: str, documents: list[str], model: str, blend: dict[str, Any]
) -> dict[str, Any]:
    """The chat request asking for ``country``'s capital over ``documents``, greedy, with the
    top-10 logprobs of each token."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": f"What is the capital of {country}?"}],
        "documents": documents,
        "max_tokens": 12,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 10,
        "blend": blend,
    }


def _request(country: str, order: list[str], model: str, blend: dict[str, Any]) -> dict[str, Any]:
    documents = [capital_document(name, CAPITALS[name]) for name in order]
    return capital_request(country, documents, model, blend)


def run_selfcheck(
    client: httpx.Client, model: str, prompts: int
) -> tuple[list[ModeReport], str | None]:
    """The reports per mode, the library's last; with why the library part was skipped."""
    reports = [ModeReport(name) for name, _ in MODES]
    countries = list(CAPITALS)
    for index in range(prompts):
        country = countries[index % len(countries)]
        order = random.Random(index).sample(countries, len(countries))
        # Store the chunks in another order: the same order under the same cache salt would let
        # vLLM's prefix cache hand this exact warm-up KV to the blended request below.
        _post(client, _request(country, order[::-1], model, MODES[1][1]))
        full = _post(client, _request(country, order, model, {"mode": "full"}))
        for report, (_, blend) in zip(reports, MODES, strict=True):
            report.add(full, _post(client, _request(country, order, model, blend)))
    library = ModeReport(LIBRARY_MODE)
    documents = {country: capital_document(country, city) for country, city in CAPITALS.items()}
    with selfcheck_documents(client, documents) as skipped:
        for index in range(prompts if skipped is None else 0):
            country = countries[index % len(countries)]
            full = capital_request(country, [], model, {"mode": "full"})
            blend = capital_request(country, [], model, {"mode": "blend"})
            library.add(
                _post(client, library_request(full, countries)),
                _post(client, library_request(blend, countries)),
            )
    return reports + ([library] if skipped is None else []), skipped


def _post(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    reply = client.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    return reply.json()


def _text(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"]


def main(url: str, api_key: str | None, prompts: int) -> int:
    with connect(url, api_key) as client:
        model = served_model(client)
        reports, skipped = run_selfcheck(client, model, prompts)
    print(f"selfcheck of {model} at {url}: {prompts} prompts, 6 shuffled documents each")
    if skipped is not None:
        print(f"{LIBRARY_MODE} skipped: {skipped}")
    print(f"{'mode':16} {'same answer as full':>20} {'first-token KL':>16}")
    for report in reports:
        same = f"{report.same_answer}/{prompts}"
        print(f"{report.name:16} {same:>20} {report.mean_divergence:>16.4f}")
    exact = reports[0]
    if exact.mean_divergence > EXACT_DIVERGENCE:
        print("FAIL: blend at ratio 1.0 differs from full prefill", file=sys.stderr)
        return 1
    print("OK: blend at ratio 1.0 reproduces full prefill")
    print("answer quality on real data: python -m load_tests.eval.server_gap --url URL --items N")
    return 0
