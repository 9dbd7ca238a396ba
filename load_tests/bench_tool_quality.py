"""Tool-call quality with the tool catalog's KV reused behind another system prompt, against a
full prefill of the same prompt, on the Berkeley Function Calling Leaderboard's own questions.

    python -m load_tests.bench_tool_quality [--model qwen2.5-coder-0.5b-instruct]
        [--per-category 30] [--recipes full,reuse,0.15] [--out <name>]

One `ragblend serve`. Per BFCL question (``simple_python``, ``multiple``, ``parallel``,
``parallel_multiple``, ``irrelevance``; an even sample of each file): first its functions behind
system prompt A (one token: the catalog's KV is kept as that prefill computed it), then the same
question behind system prompt B once per recipe: ``full`` (``blend.mode: full``), ``reuse``
(nothing of the catalog recomputed) or a recompute ratio (the tool catalog's recipe with that
ratio). Greedy, ``tool_choice: auto``. Each answer's calls are scored exactly right or not by
BFCL's possible answers (`load_tests.eval.bfcl`), read two ways side by side: the server runs
with ``RAGBLEND_TOOL_CALLS_FROM_TEXT=false`` (``tool_calls`` as the model's parser reads them),
and the same answer's content is also read for calls written as plain JSON, as the server does
with ``RAGBLEND_TOOL_CALLS_FROM_TEXT=true``. Reports each recipe's share right per category and
overall (text calls read), its paired difference from ``full`` with a 95% interval, how often
its calls equal full's, where the catalog's KV came from, and what reading text calls adds:
right calls, and false calls on ``irrelevance``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from gateway.openai.text_calls import calls_in_text
from gateway.openai.tool_types import ToolSpec
from load_tests.eval.bfcl import CATEGORIES, Question, calls_of, exactly_right, load
from load_tests.eval.metrics import mean_ci95, paired_diff_ci95
from load_tests.replica_launcher import add_model_arguments, bench_environment, one_server_client
from load_tests.report import format_grid, output_path, scratch, write_json
from load_tests.tool_catalogs import front_end_system

API_KEY = "bench-key"
FIRST_SYSTEM = "You are a helpful assistant."
SECOND_SYSTEM = front_end_system("Ada Lovelace", "2026-12-04")


def blend_options(recipe: str) -> dict[str, Any]:
    if recipe in ("full", "reuse"):
        return {"mode": recipe}
    return {"mode": "blend", "recompute_ratio": float(recipe)}


def answer(
    client: httpx.Client, question: Question, system: str, max_tokens: int, blend: dict[str, Any]
) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, *question.messages]
    body = {"model": "bench", "messages": messages, "tools": question.tools, "temperature": 0,
            "max_tokens": max_tokens, "blend": blend}  # fmt: skip
    reply = client.post("/v1/chat/completions", json=body)
    if reply.status_code != 200:
        raise RuntimeError(f"{question.id}: {reply.status_code} {reply.text}")
    return reply.json()


def run_question(
    client: httpx.Client, question: Question, recipes: list[str], max_tokens: int
) -> dict[str, Any]:
    answer(client, question, FIRST_SYSTEM, 1, {})
    row: dict[str, Any] = {"id": question.id, "category": question.category}
    for recipe in recipes:
        reply = answer(client, question, SECOND_SYSTEM, max_tokens, blend_options(recipe))
        message = reply["choices"][0]["message"]
        parsed = calls_of(message.get("tool_calls"))
        calls = parsed or calls_of_text(message.get("content") or "", question)
        source = ((reply.get("blend") or {}).get("tool_block") or {}).get("source")
        row[recipe] = {"right": exactly_right(question, calls), "calls": calls,
                       "right_parsed_only": exactly_right(question, parsed),
                       "content": message.get("content"), "catalog": source}  # fmt: skip
    return row


def calls_of_text(content: str, question: Question) -> list[tuple[str, Any]]:
    """What the server reads as calls written as plain JSON (`RAGBLEND_TOOL_CALLS_FROM_TEXT`),
    read here from the same answer so both readings are scored side by side."""
    tools = [ToolSpec.model_validate(tool) for tool in question.tools]
    return [(name, json.loads(arguments)) for name, arguments in calls_in_text(content, tools)]


def summary(rows: list[dict[str, Any]], recipes: list[str]) -> list[dict[str, Any]]:
    table = []
    for recipe in recipes:
        right = [float(row[recipe]["right"]) for row in rows]
        full = [float(row["full"]["right"]) for row in rows]
        by_category = {category: _share(rows, recipe, category) for category in CATEGORIES}
        parsed_only = [float(row[recipe]["right_parsed_only"]) for row in rows]
        diff, low, high = paired_diff_ci95(right, full)
        text_gain = paired_diff_ci95(right, parsed_only)
        table.append({
            "recipe": recipe, "right": round(mean_ci95(right)[0], 3), **by_category,
            "vs_full": [round(diff, 3), round(low, 3), round(high, 3)],
            "right_parsed_only": round(mean_ci95(parsed_only)[0], 3),
            "text_calls_gain": [round(value, 3) for value in text_gain],
            "false_calls_on_irrelevance": _false_calls(rows, recipe),
            "same_calls_as_full": round(sum(
                row[recipe]["calls"] == row["full"]["calls"] for row in rows) / len(rows), 3),
            "catalog_from_store": round(sum(
                row[recipe]["catalog"] == "chunk_store" for row in rows) / len(rows), 3),
        })  # fmt: skip
    return table


def _false_calls(rows: list[dict[str, Any]], recipe: str) -> dict[str, float | None]:
    """Irrelevance questions answered with a call: with text calls read, and parsed only."""
    irrelevant = [row for row in rows if row["category"] == "irrelevance"]
    if not irrelevant:
        return {"with_text": None, "parsed_only": None}
    with_text = sum(not row[recipe]["right"] for row in irrelevant) / len(irrelevant)
    parsed = sum(not row[recipe]["right_parsed_only"] for row in irrelevant) / len(irrelevant)
    return {"with_text": round(with_text, 3), "parsed_only": round(parsed, 3)}


def _share(rows: list[dict[str, Any]], recipe: str, category: str) -> float | None:
    scores = [float(row[recipe]["right"]) for row in rows if row["category"] == category]
    return round(sum(scores) / len(scores), 3) if scores else None


def _interval(values: list[float]) -> str:
    return "{:+.3f} [{:+.3f}, {:+.3f}]".format(*values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--per-category", type=int, default=30)
    parser.add_argument("--recipes", default="full,reuse,0.15", help="comma-separated; has full")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--kv-cache-gib", type=float, default=2.0, help="BFCL prompts are short")
    parser.add_argument("--out", default=scratch("tool_quality"), help="<out>.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    recipes = args.recipes.split(",")
    if "full" not in recipes:
        raise SystemExit("--recipes must include full: the others are compared with it")
    questions = [q for category in CATEGORIES for q in load(category, args.per_category)]
    environment = bench_environment(
        args,
        RAGBLEND_API_KEYS=API_KEY,
        RAGBLEND_TOOL_CALLS_FROM_TEXT="false",
        RAGBLEND_KV_CACHE_GIB=str(args.kv_cache_gib),
    )
    out = output_path(Path(args.out), ".json")
    rows = []
    with one_server_client("tool-quality", environment, API_KEY) as client:
        for number, question in enumerate(questions, 1):
            rows.append(run_question(client, question, recipes, args.max_tokens))
            marks = " ".join(f"{r}={int(rows[-1][r]['right'])}" for r in recipes)
            print(f"  {number}/{len(questions)} {question.id}: {marks}", file=sys.stderr)
            write_json(out, {"settings": vars(args), "rows": rows})  # kept if a run dies
    table = summary(rows, recipes)
    header = ("recipe", "right", *CATEGORIES, "vs full [95%]", "same calls", "from store",
              "parsed only", "text calls gain [95%]", "false calls text/parsed")  # fmt: skip
    print(format_grid(header, [
        (row["recipe"], str(row["right"]), *(str(row[c]) for c in CATEGORIES),
         _interval(row["vs_full"]), str(row["same_calls_as_full"]),
         str(row["catalog_from_store"]), str(row["right_parsed_only"]),
         _interval(row["text_calls_gain"]),
         "{with_text}/{parsed_only}".format(**row["false_calls_on_irrelevance"]))
        for row in table
    ]))  # fmt: skip
    document = {"settings": vars(args), "systems": [FIRST_SYSTEM, SECOND_SYSTEM],
                "summary": table, "rows": rows}  # fmt: skip
    write_json(out, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
