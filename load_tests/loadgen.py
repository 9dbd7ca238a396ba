"""Load generator for a ragblend (or any OpenAI-compatible) server.

N concurrent clients each send streaming requests back to back until ``--duration`` seconds
have passed or ``--max-requests`` requests have been started, whichever comes first; a request
still streaming at that point finishes (or times out after ``--request-timeout``). Per request it
measures the time to the first non-empty content token (TTFT), the total latency and the output
token count (``usage.completion_tokens`` from the ``include_usage`` chunk, else the number of
content chunks), and records failures by HTTP status code or error name.

Usage::

    python -m load_tests.loadgen --url http://127.0.0.1:8000 --concurrency 4 --duration 30
    python -m load_tests.loadgen --endpoint chat --max-tokens 128 --prompt-file prompts.txt \\
        --json-out results/chat.json --api-key "$KEY"

Without ``--model`` the first model listed by ``GET /v1/models`` is used. Prompts are a small
built-in set, or the non-blank lines of ``--prompt-file``. The summary (TTFT p50/p95/p99, mean
latency, ok requests/s, output tokens/s, error counts) is printed as a table and, with
``--json-out``, written as JSON. Only loopback URLs are accepted unless ``--allow-remote`` is
given. Exit status: 0 when at least one request succeeded, 1 when none did, 2 when the run could
not start (unreadable prompt file, failed model lookup, refused URL).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from load_tests.client import (
    ENDPOINT_PATHS,
    LoadPlan,
    NoServedModelError,
    RequestBudget,
    first_served_model,
    run_load,
)
from load_tests.report import format_table, report_document, summary_rows, write_json
from load_tests.stats import LoadSummary, summarize

BUILT_IN_PROMPTS = (
    "Write a Python function that checks whether a string is a palindrome.",
    "Explain in two sentences what a hash map is.",
    "def fibonacci(n: int) -> int:\n",
    "Summarize the difference between TCP and UDP.",
    "Write a SQL query that returns the ten most recent orders per customer.",
    "What does the HTTP status code 503 mean, and when should a server send it?",
    'Translate this shell loop to Python: for f in *.txt; do wc -l "$f"; done',
    "List three ways to reduce the memory use of a Python program.",
)


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m load_tests.loadgen",
        description="Streaming load generator for an OpenAI-compatible server.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL")
    parser.add_argument("--concurrency", type=positive_int, default=4)
    parser.add_argument("--duration", type=positive_float, default=30.0, help="seconds")
    parser.add_argument("--max-requests", type=positive_int, default=10_000)
    parser.add_argument("--model", help="model id (default: first listed by /v1/models)")
    parser.add_argument("--max-tokens", type=positive_int, default=64)
    parser.add_argument("--api-key", help="bearer API key, when the server requires one")
    parser.add_argument("--endpoint", choices=sorted(ENDPOINT_PATHS), default="completions")
    parser.add_argument("--prompt-file", type=Path, help="one prompt per non-blank line")
    parser.add_argument("--json-out", type=Path, help="write the summary as JSON here")
    parser.add_argument("--request-timeout", type=positive_float, default=120.0, help="seconds")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow a URL that is not a loopback address"
    )
    return parser.parse_args(argv)


def is_loopback_url(url: str) -> bool:
    host = httpx.URL(url).host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_prompts(prompt_file: Path | None) -> list[str]:
    if prompt_file is None:
        return list(BUILT_IN_PROMPTS)
    lines = prompt_file.read_text(encoding="utf-8").splitlines()
    prompts = [line.strip() for line in lines if line.strip()]
    if not prompts:
        raise ValueError(f"{prompt_file} holds no prompts")
    return prompts


async def run(
    args: argparse.Namespace, prompts: Sequence[str]
) -> tuple[dict[str, Any], LoadSummary]:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(
        base_url=args.url, headers=headers, limits=limits, timeout=args.request_timeout
    ) as client:
        plan = LoadPlan(
            endpoint=args.endpoint,
            model=args.model or await first_served_model(client),
            max_tokens=args.max_tokens,
            prompts=prompts,
            request_timeout_s=args.request_timeout,
        )
        budget = RequestBudget(args.max_requests, deadline=time.perf_counter() + args.duration)
        records, elapsed_s = await run_load(client, plan, args.concurrency, budget)
    settings = {
        "url": args.url,
        "endpoint": args.endpoint,
        "model": plan.model,
        "concurrency": args.concurrency,
        "duration_s": args.duration,
        "max_requests": args.max_requests,
        "max_tokens": args.max_tokens,
        "prompts": len(plan.prompts),
    }
    return settings, summarize(records, elapsed_s)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.allow_remote and not is_loopback_url(args.url):
        print(f"refusing non-loopback URL {args.url}; pass --allow-remote", file=sys.stderr)
        return 2
    try:
        prompts = load_prompts(args.prompt_file)
        settings, summary = asyncio.run(run(args, prompts))
    except (OSError, ValueError, NoServedModelError, httpx.HTTPError) as exc:
        print(f"load test aborted: {exc}", file=sys.stderr)
        return 2
    setting_rows = [(name, str(value)) for name, value in settings.items()]
    print(format_table([*setting_rows, *summary_rows(summary)]))
    if args.json_out is not None:
        write_json(args.json_out, report_document(settings, summary))
        print(f"wrote {args.json_out}")
    return 0 if summary.requests_ok > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
