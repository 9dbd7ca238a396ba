"""TTFT of chat requests that carry dozens of tools, as chat front ends send with every message.

    python -m load_tests.bench_tools [--model qwen2.5-coder-0.5b-instruct] [--tools 40]
        [--trials 5]

One `ragblend serve` (vLLM's prefix cache on, the default). Each trial has its own catalog
of ``--tools`` function tools (several typed parameters each, as agent frameworks declare
them), sent with every request of the trial. Each request asks for one token without
streaming, so its latency is its time to first token as the client sees it. Per trial, in
this order:

1. ``no tools``: the question alone (the baseline);
2. ``tools, new session``: the tools behind a system message no earlier request had, so no
   cached prefix holds them: the whole tool block is prefilled;
3. ``tools, next turn``: the same system message and tools, another question: what a front end
   sends next, the tool block a prefix-cache hit;
4. ``required, first``: as 3 with ``tool_choice: "required"``, decoding constrained to a call
   of one of the tools (structured outputs: a grammar over every tool's schema, first built
   for this catalog here);
5. ``required, next turn``: the same again with another question.

Each reply's prompt and cached tokens (``usage``) are kept beside its time. Prints medians and
writes a JSON file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from load_tests.replica_launcher import add_model_arguments, bench_environment, running_replicas
from load_tests.report import format_grid, output_path, scratch, write_json
from load_tests.stats import ttft_trials

API_KEY = "bench-key"
WAYS = (
    "no tools",
    "tools, new session",
    "tools, next turn",
    "required, first",
    "required, next turn",
)
_VERBS = ("get", "search", "create", "update", "delete", "list", "send", "schedule")
_OBJECTS = ("weather", "flight", "invoice", "ticket", "calendar_event", "contact", "order",
            "repository", "document", "reminder", "payment", "shipment")  # fmt: skip


def tool_catalog(count: int, catalog: int = 0) -> list[dict[str, Any]]:
    """``count`` distinct function tools with typed, described parameters; each ``catalog``
    number words the descriptions differently."""
    tools = []
    for index in range(count):
        verb, thing = _VERBS[index % len(_VERBS)], _OBJECTS[index // len(_VERBS) % len(_OBJECTS)]
        name = f"{verb}_{thing}" + (f"_{index}" if index >= len(_VERBS) * len(_OBJECTS) else "")
        parameters = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": f"Identifier of the {thing}."},
                "query": {"type": "string", "description": "Free text to match."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "sort": {"type": "string", "enum": ["newest", "oldest", "relevance"]},
                "include_archived": {"type": "boolean"},
            },
            "required": ["query"] if verb in ("search", "list") else ["id"],
        }
        description = f"{verb.capitalize()} a {thing.replace('_', ' ')} in workspace {catalog}."
        tools.append({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters}})  # fmt: skip
    return tools


def ask(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """One token for ``body``: the seconds it took and the prompt and cached tokens it used."""
    started = time.perf_counter()
    reply = client.post("/v1/chat/completions", json={**body, "max_tokens": 1, "temperature": 0})
    seconds = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{reply.status_code} {reply.text}")
    usage = reply.json()["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"seconds": seconds, "prompt_tokens": usage["prompt_tokens"], "cached_tokens": cached}


def run_trial(client: httpx.Client, tool_count: int, trial: int) -> dict[str, Any]:
    tools = tool_catalog(tool_count, catalog=trial)
    system = {"role": "system", "content": f"Session {uuid.uuid4()}. You help with a workspace."}

    def question(turn: int) -> dict[str, str]:
        return {"role": "user", "content": f"Trial {trial}, turn {turn}: find my latest invoice."}

    with_tools = {"model": "bench", "tools": tools}
    required = {**with_tools, "tool_choice": "required"}
    return {
        "no tools": ask(client, {"model": "bench", "messages": [system, question(0)]}),
        "tools, new session": ask(client, {**with_tools, "messages": [system, question(1)]}),
        "tools, next turn": ask(client, {**with_tools, "messages": [system, question(2)]}),
        "required, first": ask(client, {**required, "messages": [system, question(3)]}),
        "required, next turn": ask(client, {**required, "messages": [system, question(4)]}),
    }


def summary(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for way in WAYS:
        results = [trial[way] for trial in trials]
        rows.append({
            "way": way, **ttft_trials([result["seconds"] for result in results]),
            "prompt_tokens": statistics.median(result["prompt_tokens"] for result in results),
            "cached_tokens": statistics.median(result["cached_tokens"] for result in results),
        })  # fmt: skip
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--tools", type=int, default=40)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", default=scratch("tools_ttft"), help="<out>.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    environment = bench_environment(args, RAGBLEND_API_KEYS=API_KEY)
    with (
        tempfile.TemporaryDirectory(prefix="bench-tools-") as folder,
        running_replicas(["tools"], Path(folder), environment) as (replica,),
        httpx.Client(
            base_url=replica.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=900
        ) as client,
    ):
        run_trial(client, args.tools, trial=-1)  # warm-up: first-request costs are not the tools'
        trials = []
        for trial in range(args.trials):
            trials.append(run_trial(client, args.tools, trial))
            print(f"  trial {trial}: {trials[-1]}", file=sys.stderr)
    rows = summary(trials)
    header = ("request", "median TTFT s", "fastest s", "prompt tokens", "cached tokens")
    print(format_grid(header, [
        (row["way"], str(row["median_ttft_s"]), str(row["fastest_ttft_s"]),
         str(row["prompt_tokens"]), str(row["cached_tokens"]))
        for row in rows
    ]))  # fmt: skip
    document = {"settings": vars(args), "rows": rows, "trials": trials}
    write_json(output_path(Path(args.out), ".json"), document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
