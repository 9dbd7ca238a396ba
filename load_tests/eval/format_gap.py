"""What a compressed slow-tier format (``--compressed``: int8 or lossless) costs in answers.

    python -m load_tests.eval.format_gap --raw-url http://127.0.0.1:8101 \
        --compressed-url http://127.0.0.1:8102 --compressed int8 --out docs/bench/format_gap_int8

The servers differ only in ``RAGBLEND_CHUNK_CACHE_FORMAT``; with a memory tier too small for a
chunk (``RAGBLEND_CHUNK_CACHE_MEMORY_GIB=0.0001``) every hit is read from disk in that format.
Each held-out item (``server_gap``'s selection) is asked of both in blend (default ratio) and
reuse (the stored KV alone): per mode, each format's F1, the paired compressed - raw F1 with its
95% interval, the share answered the same. Item i+1's chunks are stored before item i is asked,
so item i's hits come from disk, not the write queue. ``--data-dirs`` also measures the stored
bytes per token. Each finished item is appended to ``<out>.items.jsonl``; a run stops at
``--budget-minutes`` or a failed request, and the same command again resumes after them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from gateway.cli.client_commands import connect, served_model
from load_tests.eval.fetch import DEFAULT_CACHE
from load_tests.eval.metrics import agreement, f1, mean_ci95, paired_diff_ci95
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.server_gap import (
    Interval,
    Reply,
    complete,
    completion_body,
    load_held_out,
    reused_share,
    warmup_body,
)
from load_tests.eval.server_stores import store_counters, stored_entries
from load_tests.report import output_path, scratch

COMPRESSED_FORMATS = ("int8", "lossless")
COMPARED_MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("blend@default", {"mode": "blend"}),
    ("reuse", {"mode": "reuse"}),
)
Replies = dict[str, dict[str, list[Reply]]]
"""format -> mode -> one reply per finished item, in item order."""


@dataclass(frozen=True)
class FormatRow:
    mode: str
    items: int
    compressed: str  # the format compared with raw
    raw_f1: Interval
    compressed_f1: Interval
    compressed_minus_raw: Interval
    """Paired mean of (the compressed format's F1 - raw's F1) over the items."""
    agreement: float
    """Share of items whose normalized answers are identical in both formats."""
    reused: dict[str, float]
    """Per format: share of prompt tokens whose KV came from the chunk store."""


def read_records(path: Path, items: list[MultiChunkItem]) -> list[dict[str, Any]]:
    """The items already answered in `path` (one JSON object a line), checked against `items`."""
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    expected = [item.id for item in items[: len(records)]]
    if [record["id"] for record in records] != expected:
        raise ValueError(f"{path} holds other items than this selection; use another --out")
    return records


def evaluate_pair(
    clients: dict[str, httpx.Client],
    model: str,
    items: list[MultiChunkItem],
    record: Path,
    out_of_time: Callable[[], bool],
) -> None:
    """Every item on every server, its chunks stored one item ahead, each finished item appended
    to `record` at once; items already there are skipped (a rerun resumes). Stops early when
    `out_of_time()` says so before an item, or when a request fails."""
    first = len(read_records(record, items))
    if first == len(items):
        return
    try:
        for client in clients.values():
            complete(client, warmup_body(model, items[first]))
        for index in tqdm(range(first, len(items)), unit="item", desc="format gap"):
            if out_of_time():
                print(f"\nbudget spent after item {index}", file=sys.stderr)
                return
            item, answers = items[index], {}
            documents, question = item.documents, item.question
            for name, client in clients.items():
                if index + 1 < len(items):
                    complete(client, warmup_body(model, items[index + 1]))
                answers[name] = {
                    mode: asdict(
                        complete(client, completion_body(model, documents, question, blend))
                    )
                    for mode, blend in COMPARED_MODES
                }
            line = {"id": item.id, "question": item.question, "gold": item.answers, **answers}
            with record.open("a") as out:
                out.write(json.dumps(line) + "\n")
    except httpx.HTTPError as error:
        print(f"\nstopping at a failed request: {error!r}", file=sys.stderr)


def replies_in(records: list[dict[str, Any]], formats: tuple[str, str]) -> Replies:
    """The recorded answers, per format and mode, in item order."""
    return {
        name: {
            mode: [Reply(**record[name][mode]) for record in records] for mode, _ in COMPARED_MODES
        }
        for name in formats
    }


def summarize(replies: Replies, golds: list[list[str]], compressed: str) -> list[FormatRow]:
    """Per mode: both formats' F1, the paired compressed - raw difference, and their agreement."""
    rows = []
    for mode, _ in COMPARED_MODES:
        raw, other = replies["raw"][mode], replies[compressed][mode]
        count = len(raw)
        raw_f1 = [f1(r.answer, gold) for r, gold in zip(raw, golds[:count], strict=True)]
        other_f1 = [f1(r.answer, gold) for r, gold in zip(other, golds[:count], strict=True)]
        rows.append(
            FormatRow(
                mode=mode,
                items=count,
                compressed=compressed,
                raw_f1=mean_ci95(raw_f1),
                compressed_f1=mean_ci95(other_f1),
                compressed_minus_raw=paired_diff_ci95(other_f1, raw_f1),
                agreement=agreement([r.answer for r in other], [r.answer for r in raw]),
                reused={name: round(reused_share(replies[name][mode]), 4) for name in replies},
            )
        )
    return rows


def print_rows(rows: list[FormatRow]) -> None:
    name = rows[0].compressed if rows else "compressed"
    scores = f"{'raw F1':>7} {name + ' F1':>11} {name + '-raw [95% CI]':>30} {'agree':>6}"
    print(f"{'mode':14} {'items':>5} {scores}")
    for row in rows:
        mean, low, high = row.compressed_minus_raw
        delta = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]"
        print(
            f"{row.mode:14} {row.items:>5} {row.raw_f1[0]:>7.3f} {row.compressed_f1[0]:>11.3f} "
            f"{delta:>30} {row.agreement:>6.1%}"
        )


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw-url", required=True, help="server with CHUNK_CACHE_FORMAT=raw")
    parser.add_argument("--compressed-url", "--int8-url", required=True, help="its server")
    parser.add_argument("--compressed", choices=COMPRESSED_FORMATS, default="int8")
    parser.add_argument("--api-key", help="bearer key, if the servers require one")
    parser.add_argument("--items", type=int, default=200, help="held-out items to evaluate")
    parser.add_argument("--budget-minutes", type=float, default=None, help="stop after this")
    parser.add_argument("--data", default=str(DEFAULT_CACHE), help="BIG-bench cache (fetch.py)")
    parser.add_argument("--data-dirs", nargs=2, metavar=("RAW", "OTHER"), help="servers' data")
    parser.add_argument(
        "--out",
        default=scratch("format_gap_int8"),
        help="<out>.items.jsonl: every answer, appended per item (a rerun resumes); "
        "<out>.json: the comparison",
    )
    return parser


def run(argv: list[str] | None = None) -> int:
    """The command line; exit status 1 when the evaluation data is missing or no item was done."""
    args = build_parser().parse_args(argv)
    items = load_held_out(args.data, args.items)
    if items is None:
        return 1
    record = output_path(args.out, ".items.jsonl")
    record.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * (args.budget_minutes or float("inf"))
    formats = ("raw", args.compressed)
    urls = dict(zip(formats, (args.raw_url, args.compressed_url), strict=True))
    clients = {name: connect(url, args.api_key) for name, url in urls.items()}
    try:
        model = served_model(clients["raw"])
        evaluate_pair(clients, model, items, record, lambda: time.monotonic() > deadline)
        counters = {name: store_counters(client) for name, client in clients.items()}
    finally:
        for client in clients.values():
            client.close()
    records = read_records(record, items)
    if not records:
        print("no item answered by both servers yet: nothing to compare", file=sys.stderr)
        return 1
    golds = [record["gold"] for record in records]
    rows = summarize(replies_in(records, formats), golds, args.compressed)
    print(f"\n{args.compressed} vs raw slow-tier chunk KV, {model}: held-out QA items")
    print_rows(rows)
    stored = {}
    if args.data_dirs:
        dirs = zip(formats, args.data_dirs, strict=True)
        stored = {name: stored_entries(Path(data_dir)) for name, data_dir in dirs}
        print({name: entries["bytes_per_token"] for name, entries in stored.items()})
    settings = {key: value for key, value in vars(args).items() if key != "api_key"}
    document = {
        "settings": {**settings, "model": model},
        "rows": [asdict(row) for row in rows],
        "store": counters,
        "stored": stored,
    }
    output_path(args.out, ".json").write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run())
