"""RAG load test: zipf-popular documents, new ones arriving, each blend mode at the same load.

    python -m load_tests.rag_load --url http://127.0.0.1:8000 --documents 24 \\
        --concurrency 4 --duration 60 --modes full,blend
    python -m load_tests.rag_load --url http://127.0.0.1:8000 --documents 24 \\
        --rates 0.5,1,2 --duration 40 --p95-target-ms 2000 --modes full,blend

Ingests synthetic one-fact documents (waiting until their chunk KV is precomputed), then, per
mode, runs streaming chat clients for a bounded time. Questions pick documents by a zipf law
(``--facts`` of them per question), retrieval (top-k) builds each prompt from a mix of chunks
whose order follows the question, and a new document arrives every few seconds. Every run gets
questions of its own (the same ones for every mode), so a later run never replays the prompts an
earlier one left in vLLM's prefix cache; each mode first runs ``--warmup`` seconds unmeasured.

Without ``--rates``, ``--concurrency`` closed-loop clients send requests back to back. With
``--rates``, each mode runs once per rate (ascending, ``--duration`` each) with requests
arriving open-loop as a Poisson process, at most ``--max-in-flight`` open (arrivals beyond are
counted as ``dropped`` errors); the run then reports, per mode, the highest rate whose TTFT p95
stayed within ``--p95-target-ms`` without errors, and blend's rate over full's.

Reports TTFT p50/p95/p99, requests/s, errors and the share of prompt tokens served from cache,
per mode (and rate), as tables and one JSON file (``modes``, or ``rates`` for a sweep).
Loopback targets only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import httpx

from load_tests.bench_prompts import WORDS
from load_tests.client import (
    LoadPlan,
    RequestBudget,
    first_served_model,
    run_load,
    wait_until_ready,
)
from load_tests.loadgen import is_loopback_url
from load_tests.open_loop import DEFAULT_MAX_IN_FLIGHT, run_at_rate
from load_tests.rate_sweep import comparison_text, parse_rates, rate_table, rates_document
from load_tests.report import format_table, milliseconds, summary_rows, write_json
from load_tests.stats import LoadSummary, summarize


def zipf_choices(count: int, draws: int, exponent: float, seed: int) -> list[int]:
    """``draws`` indices in [0, count), index i chosen with weight 1 / (i + 1) ** exponent."""
    weights = [1.0 / (index + 1) ** exponent for index in range(count)]
    return random.Random(seed).choices(range(count), weights=weights, k=draws)


def synthetic_document(index: int, sentences: int = 24) -> tuple[str, str]:
    """(id, text) of a document stating one made-up fact (Region i's capital) among filler."""
    rng = random.Random(index)
    filler = " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))).capitalize() + "."
        for _ in range(sentences)
    )
    place, city = f"Region {index}", f"Town{index:04d}"
    text = f"The capital of {place} is {city}. {filler}"
    return f"load-{index}", text


def mixed_questions(picks: list[int], facts: int) -> list[str]:
    """Questions each asking about ``facts`` consecutive picks (repeats within one dropped)."""
    questions = []
    for start in range(0, len(picks) - facts + 1, facts):
        indices = list(dict.fromkeys(picks[start : start + facts]))
        places = " and ".join(f"Region {index}" for index in indices)
        asked = "is the capital" if len(indices) == 1 else "are the capitals"
        questions.append(f"What {asked} of {places}?")
    return questions


async def _ingest(client: httpx.AsyncClient, indices: range) -> None:
    documents = [{"id": i, "text": t} for i, t in map(synthetic_document, indices)]
    reply = await client.post("/v1/documents", json={"documents": documents})
    reply.raise_for_status()


async def _wait_until_cached(client: httpx.AsyncClient, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = (await client.get("/v1/documents", params={"limit": 200})).json()["data"]
        if sum(doc["status"] == "cached" for doc in page) >= count:
            return
        await asyncio.sleep(1)
    print("warning: not every document was precomputed before the run", file=sys.stderr)


async def _arrivals(client: httpx.AsyncClient, first: int, every_s: float) -> None:
    index = first
    while True:
        await asyncio.sleep(every_s)
        await _ingest(client, range(index, index + 1))
        index += 1


def _plan(args: argparse.Namespace, model: str, questions: list[str], mode: str) -> LoadPlan:
    return LoadPlan(
        endpoint="chat",
        model=model,
        max_tokens=args.max_tokens,
        prompts=questions,
        request_timeout_s=args.request_timeout,
        extra_body={"retrieval": {"top_k": args.top_k}, "blend": {"mode": mode}},
    )


def question_blocks(questions: list[str], count: int) -> list[list[str]]:
    """``questions`` cut into ``count`` equal consecutive blocks, one per run, so that no run
    replays the questions (and the prefix-cached prompts) of an earlier one."""
    size = len(questions) // count
    if size == 0:
        raise ValueError(f"{len(questions)} questions cannot fill {count} runs")
    return [questions[index * size : (index + 1) * size] for index in range(count)]


async def _measure(
    client: httpx.AsyncClient,
    plan: LoadPlan,
    args: argparse.Namespace,
    first_document: int,
    rate_per_s: float | None,
    duration_s: float,
) -> LoadSummary:
    """One bounded run, closed-loop clients or (with a rate) open-loop arrivals."""
    arrivals = asyncio.create_task(_arrivals(client, first_document, args.arrival_every))
    budget = RequestBudget(args.max_requests, time.perf_counter() + duration_s)
    try:
        if rate_per_s is None:
            records, elapsed_s = await run_load(client, plan, args.concurrency, budget)
        else:
            records, elapsed_s = await run_at_rate(
                client, plan, rate_per_s, budget, args.seed, args.max_in_flight
            )
    finally:
        arrivals.cancel()
    return summarize(records, elapsed_s)


async def run(args: argparse.Namespace) -> dict[str, list[LoadSummary]]:
    """Per mode, one summary: of the closed-loop run, or of each ``--rates`` run in order."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=600) as client:
        await wait_until_ready(client, args.warmup_timeout)
        model = await first_served_model(client)
        await _ingest(client, range(args.documents))
        await _wait_until_cached(client, args.documents, args.warmup_timeout)
        picks = zipf_choices(args.documents, 10_000 * args.facts, args.zipf, args.seed)
        rates = args.rates or [None]
        warmup, *blocks = question_blocks(mixed_questions(picks, args.facts), len(rates) + 1)
        results: dict[str, list[LoadSummary]] = {}
        next_document = args.documents
        for mode in args.modes.split(","):
            results[mode] = []
            if args.warmup > 0:
                plan = _plan(args, model, warmup, mode)
                await _measure(client, plan, args, next_document, rates[0], args.warmup)
                next_document += 1000
            for rate, block in zip(rates, blocks, strict=True):
                plan = _plan(args, model, block, mode)
                summary = await _measure(client, plan, args, next_document, rate, args.duration)
                next_document += 1000
                results[mode].append(summary)
                if rate is None:
                    print(f"\nmode {mode}\n{format_table(summary_rows(summary))}")
                else:
                    p95 = milliseconds(summary.ttft_p95_ms)
                    print(f"mode {mode} at {rate:g} req/s: TTFT p95 {p95}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument(
        "--concurrency", type=int, default=4, help="closed-loop clients (without --rates)"
    )
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument(
        "--warmup",
        type=float,
        default=20.0,
        help="seconds of unmeasured load per mode before its runs (at the first rate), with "
        "questions of their own; 0 for none",
    )
    parser.add_argument("--max-requests", type=int, default=10_000)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument(
        "--facts", type=int, default=1, help="documents each question asks about (zipf picks)"
    )
    parser.add_argument("--arrival-every", type=float, default=10.0)
    parser.add_argument("--modes", default="full,blend")
    parser.add_argument(
        "--rates",
        type=parse_rates,
        help="open loop: Poisson arrivals per second, e.g. 0.5,1,2; one run of --duration each",
    )
    parser.add_argument(
        "--p95-target-ms",
        type=float,
        default=2000.0,
        help="with --rates: the TTFT p95 a rate must stay within to count as sustained",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=DEFAULT_MAX_IN_FLIGHT,
        help="with --rates: open requests at most; arrivals beyond are errors named dropped",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--request-timeout", type=float, default=300.0)
    parser.add_argument(
        "--warmup-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for the server to be ready and the documents precomputed",
    )
    parser.add_argument("--json-out", default="load_tests/results/rag_load.json")
    args = parser.parse_args()
    if not is_loopback_url(args.url):
        parser.error("only loopback servers are load-tested")
    if args.max_in_flight < 1:
        parser.error("--max-in-flight must be at least 1")
    results = asyncio.run(run(args))
    settings = {key: value for key, value in vars(args).items() if key != "api_key"}
    if args.rates:
        sweeps = {mode: dict(zip(args.rates, runs, strict=True)) for mode, runs in results.items()}
        for mode, sweep in sweeps.items():
            print(f"\nmode {mode}, open loop\n{rate_table(sweep, args.p95_target_ms)}")
        print(f"\n{comparison_text(sweeps, args.p95_target_ms)}")
        section = {"rates": rates_document(sweeps, args.p95_target_ms)}
    else:
        section = {"modes": {mode: asdict(runs[0]) for mode, runs in results.items()}}
    write_json(Path(args.json_out), {"settings": settings, **section})
    ok = all(summary.requests_ok for runs in results.values() for summary in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
