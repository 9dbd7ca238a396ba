"""End-to-end answer F1 of each ranking: the retrieval benchmark's library and questions, answered
by a running server through chat completions with ``retrieval``.

    python -m load_tests.bench_retrieval_answers --url http://127.0.0.1:8000 --answered 200

The library is ``bench_retrieval``'s (the first ``--passages`` distinct passages of the dataset,
document ids ``p<n>``), ingested through ``/v1/documents`` (batches already there skipped); the
questions are the first ``--answered`` of the ``--questions`` it samples (same seed), so its
recall table covers them (with ``--passages`` and ``--questions`` as it ran). Each question is
asked once per ranking (dense, keyword, hybrid: its ``ranking_options.hybrid_search`` weights)
with ``--top-k`` chunks (unset: the server's default) and the server's blend recipe, greedy, with
the QA harness's user turn and stop (``load_tests.eval.qa_prompt``). The rankings take turns
at going first, so no ranking always pays for computing the chunks another then reuses. Reported
per ranking: mean F1 (``metrics.f1``) with its 95% interval, the paired gap to dense, agreement
with dense, and the share of questions whose passage was among the chunks retrieved (from the
reply's ``retrieval`` sources). Each answered question is appended to ``<out>.items.jsonl``; the
same command resumes after them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from gateway.cli.client_commands import connect, served_model
from load_tests.bench_retrieval import RANKINGS, add_library_arguments, sample
from load_tests.eval.datasets import QA_LOADERS, QAItem
from load_tests.eval.metrics import agreement, f1, mean_ci95, paired_diff_ci95
from load_tests.eval.qa_prompt import MAX_TOKENS, STOP, question_text
from load_tests.report import format_grid, output_path, scratch

INGEST_BATCH = 128
BASELINE = "dense"


def ranking_turns(index: int) -> list[str]:
    """The rankings in the order question `index` asks them: each goes first in turn."""
    names = list(RANKINGS)
    shift = index % len(names)
    return names[shift:] + names[:shift]


def chat_body(model: str, question: str, ranking: str, top_k: int | None) -> dict[str, Any]:
    """A greedy chat completion retrieving `top_k` chunks (None: the server's) by `ranking`."""
    embedding_weight, text_weight = RANKINGS[ranking]
    weights = {"embedding_weight": embedding_weight, "text_weight": text_weight}
    retrieval = {"ranking_options": {"hybrid_search": weights}, "top_k": top_k}
    return {
        "model": model,
        "messages": [{"role": "user", "content": question_text(question)}],
        "retrieval": {key: value for key, value in retrieval.items() if value is not None},
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stop": list(STOP),
    }


def ingest_library(client: httpx.Client, passages: list[str]) -> None:
    """Every passage as document ``p<n>``, in batches; a batch whose last document the server
    holds already is skipped (a cut run's)."""
    for start in tqdm(range(0, len(passages), INGEST_BATCH), unit="batch", desc="ingest"):
        end = min(start + INGEST_BATCH, len(passages))
        if client.get(f"/v1/documents/p{end - 1}").status_code == 200:
            continue
        documents = [{"id": f"p{number}", "text": passages[number]} for number in range(start, end)]
        reply = client.post("/v1/documents", json={"documents": documents})
        reply.raise_for_status()


def answer(
    client: httpx.Client, model: str, item: QAItem, gold: str, ranking: str, top_k: int | None
) -> dict:
    """One ranking's answer to `item`, scored, with whether `gold` was retrieved."""
    started = time.monotonic()
    body = chat_body(model, item.question, ranking, top_k)
    reply = client.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    payload = reply.json()
    text = payload["choices"][0]["message"]["content"].strip()
    found = [source["document_id"] for source in payload["retrieval"]]
    return {
        "answer": text,
        "f1": f1(text, item.answers),
        "gold_retrieved": gold in found,
        "chunks": len(found),
        "seconds": time.monotonic() - started,
    }


def read_done(path: Path, items: list[QAItem]) -> list[dict]:
    """The records a cut run of the same questions left in `path`, in order."""
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if [record["id"] for record in records] != [item.id for item in items[: len(records)]]:
        raise SystemExit(f"{path} holds other questions: remove it or change --out")
    return records


def summarize(records: list[dict]) -> list[dict[str, Any]]:
    """Per ranking: F1 with its interval, paired gap to dense, agreement, gold recall."""
    rows = []
    base = [record[BASELINE] for record in records]
    for ranking in RANKINGS:
        results = [record[ranking] for record in records]
        scores = [result["f1"] for result in results]
        gap = paired_diff_ci95(scores, [result["f1"] for result in base])
        rows.append(
            {
                "ranking": ranking,
                "f1": mean_ci95(scores),
                "gap_to_dense": gap,
                "agree_with_dense": agreement(
                    [r["answer"] for r in results], [r["answer"] for r in base]
                ),
                "gold_recall": sum(r["gold_retrieved"] for r in results) / len(results),
                "mean_seconds": sum(r["seconds"] for r in results) / len(results),
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    def interval(values: tuple[float, float, float], sign: str = "") -> list[str]:
        mean, low, high = values
        return [f"{mean:{sign}.3f}", f"[{low:{sign}.3f}, {high:{sign}.3f}]"]

    header = ["ranking", "F1", "95% CI", "gap", "paired 95% CI", "agree", "gold", "s/answer"]
    return format_grid(
        header,
        [
            [
                row["ranking"],
                *interval(row["f1"]),
                *interval(row["gap_to_dense"], "+"),
                f"{row['agree_with_dense']:.2f}",
                f"{row['gold_recall']:.3f}",
                f"{row['mean_seconds']:.1f}",
            ]
            for row in rows
        ],
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_library_arguments(parser)
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the running server")
    parser.add_argument("--api-key", help="bearer key, if the server requires one")
    parser.add_argument("--answered", type=int, default=200, help="questions answered")
    parser.add_argument("--top-k", type=int, help="chunks retrieved (unset: the server's)")
    parser.add_argument("--out", default=scratch("retrieval_answers"), help="<out>.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    passages, asked = sample(
        QA_LOADERS[args.dataset](Path(args.data)), args.passages, args.questions, args.seed
    )
    items = asked[: args.answered]
    ids = {passage: f"p{number}" for number, passage in enumerate(passages)}
    done_path = output_path(Path(args.out), ".items.jsonl")
    done_path.parent.mkdir(parents=True, exist_ok=True)
    records = read_done(done_path, items)
    with connect(args.url, args.api_key) as client:
        model = served_model(client)
        ingest_library(client, passages)
        with done_path.open("a") as log:
            for index in tqdm(range(len(records), len(items)), unit="question", desc="answer"):
                item = items[index]
                record: dict[str, Any] = {"id": item.id}
                for ranking in ranking_turns(index):
                    gold = ids[item.passage]
                    record[ranking] = answer(client, model, item, gold, ranking, args.top_k)
                records.append(record)
                log.write(json.dumps(record) + "\n")
                log.flush()
    rows = summarize(records)
    print(f"{model}: {len(passages)} passages, {len(records)} questions; gap = F1 - dense's F1")
    print(table(rows))
    document = {"settings": vars(args), "model": model, "questions": len(records), "rows": rows}
    output_path(Path(args.out), ".json").write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
