"""TTFT of chat requests that carry dozens of tools, as chat front ends send with every message.

    python -m load_tests.bench_tools [--model qwen2.5-coder-0.5b-instruct] [--tools 40]
        [--shape agent|front-end] [--trials 5]

One `ragblend serve` (vLLM's prefix cache on, the default). Each trial has its own catalog
(``agent``: ``--tools`` typed function tools; ``front-end``: Open WebUI's shape, 28 built-in
tools behind a system prompt naming the user and the date), sent with every request of the
trial. Each request asks for one token without streaming, so its latency is its time to first
token as the client sees it. Per trial, in this order:

1. ``no tools``: the question alone (the baseline);
2. ``catalog first seen``: the trial's catalog behind a new system prompt, computed by one
   prefill (which keeps the catalog's KV);
3. ``new session, blended`` (one per ``--ratios``) and ``new session, full prefill`` (their
   order rotates per trial): each behind a system prompt no request had, so vLLM's prefix cache
   holds nothing of the catalog; the blended ones reuse the catalog's KV from the chunk store,
   the last asks for a full prefill (``blend.mode: full``) of the same kind of prompt;
4. ``next turn``: the first blended session's next question, the catalog in vLLM's prefix
   cache;
5. ``required, new session``: as the blended one with ``tool_choice: "required"`` (decoding
   constrained to a call of one of the tools);
6. ``required, next turn``: the same session's next question.

Each reply's prompt and cached tokens (``usage``) and where the catalog's KV came from
(``blend.tool_block.source``) are kept beside its time. Prints medians, the full prefill's
median over the blended one's, and writes a JSON file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from load_tests.replica_launcher import add_model_arguments, bench_environment, one_server_client
from load_tests.report import format_grid, output_path, scratch, write_json
from load_tests.stats import ttft_trials
from load_tests.tool_catalogs import front_end_catalog, front_end_system, tool_catalog

API_KEY = "bench-key"
FULL = "new session, full prefill"


def blended_way(ratio: str) -> str:
    """The row of a new session blended at ``ratio`` (``default``: the server's recipe)."""
    return "new session, blended" if ratio == "default" else f"new session, blended at {ratio}"


def ways(ratios: list[str]) -> list[str]:
    return ["no tools", "catalog first seen", *map(blended_way, ratios), FULL, "next turn",
            "required, new session", "required, next turn"]  # fmt: skip


_USERS = ("Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret")


def ask(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """One token for ``body``: the seconds it took, the prompt and cached tokens it used and
    where the catalog's KV came from."""
    started = time.perf_counter()
    reply = client.post("/v1/chat/completions", json={**body, "max_tokens": 1, "temperature": 0})
    seconds = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{reply.status_code} {reply.text}")
    answer = reply.json()
    usage = answer["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    catalog = (answer.get("blend") or {}).get("tool_block") or {}
    return {"seconds": seconds, "prompt_tokens": usage["prompt_tokens"], "cached_tokens": cached,
            "catalog": catalog.get("source")}  # fmt: skip


def run_trial(client: httpx.Client, args: argparse.Namespace, trial: int) -> dict[str, Any]:
    front_end = args.shape == "front-end"
    tools = front_end_catalog(trial) if front_end else tool_catalog(args.tools, catalog=trial)

    def system() -> dict[str, str]:
        session = uuid.uuid4().hex[:8]
        if front_end:
            user = f"{_USERS[trial % len(_USERS)]} ({session})"
            return {"role": "system", "content": front_end_system(user, f"2026-12-{trial + 1:02}")}
        return {"role": "system", "content": f"Session {session}. You help with a workspace."}

    def question(turn: int) -> dict[str, str]:
        return {"role": "user", "content": f"Trial {trial}, turn {turn}: find my latest invoice."}

    def session(system_message: dict[str, str], turn: int, **extra: Any) -> dict[str, Any]:
        return {"model": "bench", "tools": tools, "messages": [system_message, question(turn)],
                **extra}  # fmt: skip

    results = {"no tools": ask(client, {"model": "bench", "messages": [system(), question(0)]})}
    results["catalog first seen"] = ask(client, session(system(), 1))
    sessions = {ratio: system() for ratio in [*args.ratios, "full"]}
    order = list(sessions)[trial % len(sessions) :] + list(sessions)[: trial % len(sessions)]
    for ratio in order:
        if ratio == "full":
            results[FULL] = ask(client, session(sessions[ratio], 2, blend={"mode": "full"}))
        else:
            blend = {} if ratio == "default" else {"recompute_ratio": float(ratio)}
            results[blended_way(ratio)] = ask(client, session(sessions[ratio], 2, blend=blend))
    results["next turn"] = ask(client, session(sessions[args.ratios[0]], 3))
    required = system()
    results["required, new session"] = ask(client, session(required, 4, tool_choice="required"))
    results["required, next turn"] = ask(client, session(required, 5, tool_choice="required"))
    return results


def summary(trials: list[dict[str, Any]], ratios: list[str]) -> list[dict[str, Any]]:
    rows = []
    for way in ways(ratios):
        results = [trial[way] for trial in trials]
        rows.append({
            "way": way, **ttft_trials([result["seconds"] for result in results]),
            "prompt_tokens": statistics.median(result["prompt_tokens"] for result in results),
            "cached_tokens": statistics.median(result["cached_tokens"] for result in results),
            "catalog": sorted({str(result.get("catalog")) for result in results}),
        })  # fmt: skip
    return rows


def blend_speedup(trials: list[dict[str, Any]], way: str = "new session, blended") -> float:
    """The median over trials of the full prefill's TTFT over a blended one's (a new session
    with a known catalog), each pair measured in the same trial."""
    return round(
        statistics.median(trial[FULL]["seconds"] / trial[way]["seconds"] for trial in trials), 2
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--tools", type=int, default=40, help="with --shape agent")
    parser.add_argument("--shape", choices=["agent", "front-end"], default="agent")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument(
        "--ratios",
        type=lambda text: text.split(","),
        default=["default"],
        help="recompute ratios of the blended new sessions, side by side (default: the server's)",
    )
    parser.add_argument("--out", default=scratch("tools_ttft"), help="<out>.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    environment = bench_environment(args, RAGBLEND_API_KEYS=API_KEY)
    with one_server_client("tools", environment, API_KEY) as client:
        run_trial(client, args, trial=99)  # warm-up: first-request costs are not the tools'
        trials = []
        for trial in range(args.trials):
            trials.append(run_trial(client, args, trial))
            print(f"  trial {trial}: {trials[-1]}", file=sys.stderr)
    rows = summary(trials, args.ratios)
    header = ("request", "median TTFT s", "fastest s", "prompt tokens", "cached tokens", "catalog")
    print(format_grid(header, [
        (row["way"], str(row["median_ttft_s"]), str(row["fastest_ttft_s"]),
         str(row["prompt_tokens"]), str(row["cached_tokens"]), "/".join(row["catalog"]))
        for row in rows
    ]))  # fmt: skip
    speedup = {ratio: blend_speedup(trials, blended_way(ratio)) for ratio in args.ratios}
    print(f"new session: full prefill / blended, median of per-trial ratios: {speedup}")
    document = {"settings": vars(args), "rows": rows, "speedup": speedup, "trials": trials}
    write_json(output_path(Path(args.out), ".json"), document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
