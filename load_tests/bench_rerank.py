"""The reranker's cost and gain: milliseconds it adds to a search of the top 20, and recall@1/5 and
MRR of dense, hybrid and hybrid with the reranker side by side, on real questions.

    python -m load_tests.bench_rerank --data tests/data/eval_sample --queries 50 \\
        --out docs/bench/rerank_eval_sample

The library is built as ``bench_retrieval`` builds it (one document per passage of the
knowledge-conflict task, SQLite FTS5 beside FAISS, all-MiniLM-L6-v2, the served model's
tokenizer), plus the XSum articles where the data has them, as distractors. The reranker is
ragblend's (`retriever.search.query_likelihood`: the served model's weights, by default
SmolLM2-135M). Latency is the reranker's call alone on the hybrid ranking's best `--candidates`
chunks, over `--queries` searches (the questions in turn, repeated when there are fewer), with
torch on `--threads` threads: cold, the passages' KV computed in the call (a reranker with no
cache; the first `--cold-queries` searches, as it is slow); warm, only the question computed
over each passage's cached KV, as a library searched again and again runs once its chunks have
been read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from load_tests.bench_retrieval import gold_rank, recall_grid, retrieval_scores, sample
from load_tests.eval.datasets import QA_LOADERS, load_xsum
from load_tests.report import output_path, scratch
from load_tests.stats import percentile

RANKINGS = {
    "dense": (1.0, 0.0, False),
    "hybrid": (1.0, 1.0, False),
    "dense + rerank": (1.0, 0.0, True),
    "hybrid + rerank": (1.0, 1.0, True),
}
"""Each ranking's (embedding weight, text weight, rerank)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="tests/data/eval_sample", help="BIG-bench task folder")
    parser.add_argument("--dataset", choices=sorted(QA_LOADERS), default="knowledge_conflicts")
    parser.add_argument("--passages", type=int, default=2000, help="most documents")
    parser.add_argument("--questions", type=int, default=500, help="most questions scored")
    parser.add_argument("--queries", type=int, default=50, help="timed reranker calls")
    parser.add_argument("--cold-queries", type=int, default=10, help="of them timed cold")
    parser.add_argument("--candidates", type=int, default=20, help="chunks reranked")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (embedding)")
    parser.add_argument("--rerank-threads", type=int, default=1, help="the reranker's own")
    parser.add_argument("--model", default="data/models/smollm2-135m-instruct")
    parser.add_argument("--dtype", default="bfloat16", help="the reranker's (as the server's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=scratch("rerank"), help="<out>.json")
    return parser


def latency(reranker: Any, queries: list[str], texts: list[list[str]]) -> dict[str, float]:
    """p50/p95/mean milliseconds of ``reranker.scores`` over the queries, each on its texts."""
    spent = []
    for query, candidates in zip(queries, texts, strict=True):
        started = time.perf_counter()
        reranker.scores(query, candidates)
        spent.append(1000 * (time.perf_counter() - started))
    return {
        "p50_ms": percentile(spent, 50),
        "p95_ms": percentile(spent, 95),
        "mean_ms": sum(spent) / len(spent),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from retriever import (
        DEFAULT_PROJECT,
        Embedder,
        Library,
        NewDocument,
        QueryLikelihoodReranker,
        Ranking,
        Tenant,
    )

    torch.set_num_threads(args.threads)
    tenant = Tenant(DEFAULT_PROJECT, kv_salt="")
    data = Path(args.data)
    passages, asked = sample(
        QA_LOADERS[args.dataset](data), args.passages, args.questions, args.seed
    )
    documents = [NewDocument(f"p{number}", text) for number, text in enumerate(passages)]
    with contextlib.suppress(FileNotFoundError):  # without XSum: the passages alone
        documents += [NewDocument(item.id, item.document) for item in load_xsum(data)]
    reranker = QueryLikelihoodReranker.load(
        Path(args.model), 1 << 30, args.dtype, args.rerank_threads
    )
    rows, timed = [], {}
    with tempfile.TemporaryDirectory() as scratch_dir:
        library = Library(
            Path(scratch_dir),
            reranker.tokenizer,
            Embedder(),
            reranker=reranker,
            rerank_candidates=args.candidates,
        )
        library.ingest(documents, tenant=tenant)
        for name, (dense, text, rerank) in RANKINGS.items():
            ranking = Ranking(dense, text, rerank=rerank)
            started = time.perf_counter()
            ranks = [
                gold_rank(
                    [
                        hit.document_id
                        for hit in library.search(item.question, 10, ranking=ranking, tenant=tenant)
                    ],
                    f"p{passages.index(item.passage)}",
                )
                for item in asked
            ]
            seconds = (time.perf_counter() - started) / len(asked)
            rows.append({"ranking": name, **retrieval_scores(ranks), "seconds_per_query": seconds})
            print(f"{name}: {1000 * seconds:.0f} ms a search", file=sys.stderr)
        queries = [asked[n % len(asked)].question for n in range(args.queries)]
        hybrid = Ranking(1.0, 1.0, rerank=False)
        texts = [
            [hit.text for hit in library.search(q, args.candidates, ranking=hybrid, tenant=tenant)]
            for q in queries
        ]
        library.close()
    print(f"{args.dataset}: {len(documents)} documents, {len(asked)} questions")
    print(recall_grid(rows), flush=True)
    cold = QueryLikelihoodReranker(reranker.model, reranker.tokenizer, 0, args.rerank_threads)
    timed["cold"] = latency(cold, queries[: args.cold_queries], texts[: args.cold_queries])
    latency(reranker, queries[: len(asked)], texts[: len(asked)])  # every passage read once
    timed["warm"] = latency(reranker, queries, texts)
    timed["candidates_per_call"] = sum(map(len, texts)) / len(texts)
    for kind in ("cold", "warm"):
        print(f"rerank of {timed['candidates_per_call']:.1f} chunks, {kind}: {timed[kind]}")
    out = output_path(Path(args.out), ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "settings": vars(args),
        "documents": len(documents),
        "questions": len(asked),
        "rows": rows,
        "rerank_latency": timed,
    }
    out.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
