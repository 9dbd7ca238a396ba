"""Blend's answer-quality gap on real data, measured against a running server over HTTP.

    python -m load_tests.eval.server_gap --url http://127.0.0.1:8000 --items 30

The held-out knowledge-conflict QA items of ``load_tests.eval.quality`` (gold passage plus 5
distractors, shuffled; the same selection) go to the running server as chat completions
with ``documents``: full prefill, blend at the server's default ratio, and reuse (the lower bound).
Reported per mode: mean F1 with its 95% interval, the paired F1 gap to full with its interval,
agreement with full's answers, and the share of prompt tokens reused from the chunk store.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from gateway.cli.client_commands import connect, served_model
from load_tests.eval.fetch import DEFAULT_CACHE, is_fetched
from load_tests.eval.metrics import agreement, f1, mean_ci95, paired_diff_ci95
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.qa_prompt import MAX_TOKENS, STOP, question_text
from load_tests.eval.quality import load_items

DATASET = "knowledge_conflicts"
DISTRACTORS = 5
SEED = 0
MAX_PASSAGE_WORDS = 400
EVAL_MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("full", {"mode": "full"}),
    ("blend@default", {"mode": "blend"}),
    ("reuse", {"mode": "reuse"}),
)
Interval = tuple[float, float, float]
"""(mean, low, high) of a 95% interval."""


class EvalDataMissing(RuntimeError):
    """The BIG-bench task files are not in the data folder."""


@dataclass(frozen=True)
class Reply:
    answer: str
    reused_tokens: int
    prompt_tokens: int


@dataclass(frozen=True)
class EvalRow:
    mode: str
    f1: Interval
    gap_to_full: Interval | None
    """Paired mean of (this mode's F1 - full's F1) over the items; None for full itself."""
    agree_with_full: float
    reused: float
    """Share of prompt tokens whose KV came from the chunk store."""


def held_out_items(data: Path, count: int) -> list[MultiChunkItem]:
    """``count`` held-out items, chosen exactly as ``load_tests.eval.quality`` chooses them."""
    if not is_fetched(data):
        raise EvalDataMissing(
            f"no BIG-bench evaluation data in {data}; fetch it once (~360 MB download) with: "
            f"python -m load_tests.eval.fetch --cache {data}"
        )
    settings = argparse.Namespace(
        data=str(data),
        dataset=DATASET,
        distractors=DISTRACTORS,
        seed=SEED,
        max_passage_words=MAX_PASSAGE_WORDS,
        split="held_out",
        items=count,
    )
    return load_items(settings)


def load_held_out(data: str | Path, count: int) -> list[MultiChunkItem] | None:
    """``held_out_items``, or None once it has printed why: the evaluation data is missing."""
    try:
        return held_out_items(Path(data), count)
    except EvalDataMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def completion_body(
    model: str, documents: list[str], question: str, blend: dict[str, Any]
) -> dict[str, Any]:
    """A greedy ``/v1/chat/completions`` request: each document its own chunk, then the question."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": question_text(question)}],
        "documents": documents,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stop": list(STOP),
        "blend": blend,
    }


def warmup_body(model: str, item: MultiChunkItem) -> dict[str, Any]:
    """Stores the item's chunks. The order is reversed so that vLLM's prefix cache cannot hand
    this request's KV (computed exactly on a chunk miss) to the measured blended requests."""
    body = completion_body(model, item.documents[::-1], item.question, {"mode": "blend"})
    return {**body, "max_tokens": 1}


def complete(client: httpx.Client, body: dict[str, Any]) -> Reply:
    reply = client.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    payload = reply.json()
    return Reply(
        payload["choices"][0]["message"]["content"].strip(),
        payload.get("blend", {}).get("reused_tokens", 0),
        payload["usage"]["prompt_tokens"],
    )


def evaluate(
    client: httpx.Client, model: str, items: list[MultiChunkItem]
) -> dict[str, list[Reply]]:
    """Every item in every mode, its chunks stored first; the replies per mode, in item order."""
    replies: dict[str, list[Reply]] = {name: [] for name, _ in EVAL_MODES}
    for item in tqdm(items, unit="item", desc="eval"):
        complete(client, warmup_body(model, item))
        for name, blend in EVAL_MODES:
            body = completion_body(model, item.documents, item.question, blend)
            replies[name].append(complete(client, body))
    return replies


def summarize(replies: dict[str, list[Reply]], golds: list[list[str]]) -> list[EvalRow]:
    """Per mode: F1 interval, paired gap to full, agreement with full, share of reused KV."""
    scores = {
        mode: [f1(r.answer, gold) for r, gold in zip(rs, golds, strict=True)]
        for mode, rs in replies.items()
    }
    full = replies["full"]
    rows = []
    for mode, results in replies.items():
        gap = None if mode == "full" else paired_diff_ci95(scores[mode], scores["full"])
        rows.append(
            EvalRow(
                mode=mode,
                f1=mean_ci95(scores[mode]),
                gap_to_full=gap,
                agree_with_full=agreement([r.answer for r in results], [r.answer for r in full]),
                reused=reused_share(results),
            )
        )
    return rows


def reused_share(replies: list[Reply]) -> float:
    """The share of the replies' prompt tokens whose KV came from the chunk store."""
    prompt_tokens = sum(reply.prompt_tokens for reply in replies)
    return sum(reply.reused_tokens for reply in replies) / max(1, prompt_tokens)


def _interval(interval: Interval | None, signed: bool = False) -> str:
    if interval is None:
        return f"{'-':>7} {'':>17}"
    mean, low, high = interval
    sign = "+" if signed else ""
    bounds = "" if math.isnan(low) else f"[{low:{sign}.3f}, {high:{sign}.3f}]"
    return f"{mean:>{sign}7.3f} {bounds:>17}"


def print_rows(rows: list[EvalRow]) -> None:
    interval = f"{'95% CI':>17}"
    print(f"{'mode':16} {'F1':>7} {interval} {'gap':>7} {interval} {'agree':>6} {'reused':>7}")
    for row in rows:
        print(
            f"{row.mode:16} {_interval(row.f1)} {_interval(row.gap_to_full, signed=True)} "
            f"{row.agree_with_full:>6.2f} {row.reused:>7.1%}"
        )


def main(url: str, api_key: str | None, items: list[MultiChunkItem]) -> list[EvalRow]:
    """Evaluate ``items`` on the server at ``url``, print the table, return its rows."""
    with connect(url, api_key) as client:
        model = served_model(client)
        replies = evaluate(client, model, items)
    rows = summarize(replies, [item.answers for item in items])
    print(
        f"\nanswer quality of {model}: {len(items)} held-out knowledge-conflict QA items, "
        f"gold passage + {DISTRACTORS} distractors, shuffled; gap = F1 - full's F1 (paired)"
    )
    print_rows(rows)
    return rows


def run(argv: list[str] | None = None) -> int:
    """The command line; exit status 1 when the evaluation data is missing."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the running server")
    parser.add_argument("--api-key", help="bearer key, if the server requires one")
    parser.add_argument("--items", type=int, default=30, help="held-out items to evaluate")
    parser.add_argument("--data", default=str(DEFAULT_CACHE), help="BIG-bench cache (fetch.py)")
    args = parser.parse_args(argv)
    items = load_held_out(args.data, args.items)
    if items is None:
        return 1
    main(args.url, args.api_key, items)
    return 0


if __name__ == "__main__":
    sys.exit(run())
