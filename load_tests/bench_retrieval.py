"""Recall@1/5/10 and MRR of the library's rankings: dense, keyword and hybrid, on real questions.

Each passage of a BIG-bench QA task (fetched by ``load_tests.eval.fetch``: Natural Questions with
Wikipedia paragraphs, Disfl-QA's disfluent SQuAD questions, Quoref) becomes one document of a
real embedded library (SQLite FTS5 beside FAISS, the bundled all-MiniLM-L6-v2, the served
model's tokenizer); each sampled question is searched by each ranking, and the rank of its own
passage's document among the documents found (the first 10) is scored. Nobody here wrote the
questions or the passages.

Usage: ``python -m load_tests.bench_retrieval --dataset knowledge_conflicts --passages 2000
--questions 500`` (``--out`` names the JSON; the default is the scratch folder).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from load_tests.eval.datasets import QA_LOADERS
from load_tests.eval.fetch import DEFAULT_CACHE
from load_tests.report import format_grid, output_path, scratch

CUTOFFS = (1, 5, 10)
RANKINGS = {"dense": (1.0, 0.0), "keyword": (0.0, 1.0), "hybrid": (1.0, 1.0)}
"""Each ranking's (embedding weight, text weight), as ``ranking_options.hybrid_search``."""
INGEST_BATCH = 256


def gold_rank(found: Sequence[str], gold: str) -> int | None:
    """1-based rank of `gold` among the distinct documents of `found` (chunks, best first)."""
    distinct = list(dict.fromkeys(found))
    return distinct.index(gold) + 1 if gold in distinct else None


def retrieval_scores(ranks: Sequence[int | None], cutoffs: Sequence[int] = CUTOFFS) -> dict:
    """recall@k (share of questions whose passage ranks k or better) and MRR (mean of 1/rank,
    0 where it was not found) over `ranks`."""
    if not ranks:
        raise ValueError("no questions were scored")
    scores = {
        f"recall@{k}": sum(rank is not None and rank <= k for rank in ranks) / len(ranks)
        for k in cutoffs
    }
    scores["mrr"] = sum(1 / rank for rank in ranks if rank is not None) / len(ranks)
    return scores


def recall_grid(rows: Sequence[dict]) -> str:
    """The rows (``ranking``, the ``retrieval_scores``, ``seconds_per_query``) as a grid."""
    header = ["ranking", *(f"recall@{k}" for k in CUTOFFS), "mrr", "ms/query"]
    cells = [
        [
            row["ranking"],
            *(f"{row[key]:.3f}" for key in header[1:-1]),
            f"{1000 * row['seconds_per_query']:.0f}",
        ]
        for row in rows
    ]
    return format_grid(header, cells)


def sample(items: list, passages: int, questions: int, seed: int) -> tuple[list[str], list]:
    """The first `passages` distinct passages, and `questions` items asked about them."""
    kept = list(dict.fromkeys(item.passage for item in items))[:passages]
    allowed = set(kept)
    asked = [item for item in items if item.passage in allowed]
    return kept, random.Random(seed).sample(asked, min(questions, len(asked)))


def add_library_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the library and the questions (``sample``)."""
    parser.add_argument("--dataset", choices=sorted(QA_LOADERS), default="knowledge_conflicts")
    parser.add_argument("--passages", type=int, default=2000, help="documents in the library")
    parser.add_argument("--questions", type=int, default=500, help="questions searched")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(DEFAULT_CACHE), help="BIG-bench cache (fetch.py)")


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([])`` gives the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_library_arguments(parser)
    parser.add_argument(
        "--tokenizer",
        default="data/models/smollm2-135m-instruct",
        help="the served model's tokenizer folder (chunks are cut by its tokens)",
    )
    parser.add_argument("--out", default=scratch("retrieval"), help="<out>.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers import AutoTokenizer

    from retriever import DEFAULT_PROJECT, Embedder, Library, NewDocument, Ranking, Tenant

    tenant = Tenant(DEFAULT_PROJECT, kv_salt="")  # the library alone: no KV, no salt

    passages, asked = sample(
        QA_LOADERS[args.dataset](Path(args.data)), args.passages, args.questions, args.seed
    )
    ids = {passage: f"p{number}" for number, passage in enumerate(passages)}
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    rows = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        library = Library(Path(scratch_dir), tokenizer, Embedder())
        started = time.monotonic()
        for start in range(0, len(passages), INGEST_BATCH):
            batch = passages[start : start + INGEST_BATCH]
            library.ingest([NewDocument(ids[passage], passage) for passage in batch], tenant=tenant)
        print(f"ingested {len(passages)} passages in {time.monotonic() - started:.0f} s")
        for name, weights in RANKINGS.items():
            ranking = Ranking(*weights)
            started = time.monotonic()
            ranks = [
                gold_rank(
                    [
                        hit.document_id
                        for hit in library.search(
                            item.question, 10, None, None, ranking, tenant=tenant
                        )
                    ],
                    ids[item.passage],
                )
                for item in asked
            ]
            seconds = (time.monotonic() - started) / len(asked)
            rows.append({"ranking": name, **retrieval_scores(ranks), "seconds_per_query": seconds})
        library.close()
    print(f"{args.dataset}: {len(passages)} passages, {len(asked)} questions")
    print(recall_grid(rows))
    out = output_path(Path(args.out), ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"settings": vars(args), "questions": len(asked), "rows": rows}
    out.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
