"""Search latency of the library at 10K and 100K chunks: dense (FAISS), keyword (the database's
full-text index) and hybrid (both, fused), p50 and p95 per query.

    python -m load_tests.bench_search_latency --chunks 10000 100000 --queries 300

What is real and what is not. Queries are real questions (the knowledge-conflict task) and go
through ``Library.search`` whole: the query embedded by the bundled all-MiniLM-L6-v2, the FAISS
search, the keyword search, the fusion and the chunks read back. The chunks are not real
documents: embedding 100K chunks with MiniLM takes about 15 minutes on 2 free cores (hours on
the shared ones), so each chunk's text is ``--sentences`` sentences drawn at random from the
real passages of the three QA tasks (real words at their real frequencies, which is what a
full-text index's cost depends on; every text distinct, as the library stores identical content
once), and its vector is pseudo-random (unit Gaussian, seeded by the text): a flat index scans
every vector whatever their values. Each size is a library (SQLite with FTS5, the default
backend) ingested through ``Library.ingest`` into a scratch folder, or with ``--libraries DIR``
into ``DIR/<chunks>`` once and reused by later runs (100K chunks take 10-20 minutes to ingest),
which is also how two versions of the code are timed on the same libraries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from load_tests.bench_retrieval import RANKINGS
from load_tests.eval.datasets import QA_LOADERS
from load_tests.eval.fetch import DEFAULT_CACHE
from load_tests.report import format_grid, output_path, scratch

INGEST_BATCH = 5000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class PseudoRandomVectors:
    """An embedder for ingest only: a unit vector per text, seeded by the text's hash."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        vectors = np.stack(
            [
                np.random.default_rng(
                    int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest())
                ).standard_normal(self.dim, dtype=np.float32)
                for text in texts
            ]
        )
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def real_sentences(data: Path) -> list[str]:
    """The distinct sentences of the distinct passages of the QA tasks."""
    passages = {item.passage for load in QA_LOADERS.values() for item in load(data)}
    sentences = (
        part.strip() for passage in sorted(passages) for part in _SENTENCE_END.split(passage)
    )
    return list(dict.fromkeys(sentence for sentence in sentences if len(sentence.split()) >= 4))


def chunk_texts(sentences: list[str], count: int, per_chunk: int, seed: int) -> list[str]:
    """`count` distinct texts of `per_chunk` sentences each, drawn at random."""
    rng = random.Random(seed)
    texts: dict[str, None] = {}
    while len(texts) < count:
        texts[" ".join(rng.sample(sentences, per_chunk))] = None
    return list(texts)


def percentiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds."""
    cuts = statistics.quantiles(seconds, n=20, method="inclusive")
    return {"p50_ms": 1000 * statistics.median(seconds), "p95_ms": 1000 * cuts[18]}


@contextmanager
def library_folder(libraries: str | None, count: int) -> Iterator[Path]:
    """Where the library of `count` texts is built: `libraries/<count>`, kept, or a scratch
    folder removed afterwards."""
    if libraries is not None:
        yield Path(libraries) / str(count)
        return
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def measure(
    library, questions: list[str], top_k: int, rankings: list[str]
) -> dict[str, dict[str, float]]:
    """Per ranking of `rankings`: the latency percentiles of searching every question (after one
    warm-up); and of embedding the question alone, which every search but a keyword-only one
    includes."""
    from retriever import DEFAULT_PROJECT, Ranking, Tenant

    tenant = Tenant(DEFAULT_PROJECT, kv_salt="")  # the library alone: no KV, no salt

    library.embedder.embed(questions[:1])
    seconds = []
    for question in questions:
        started = time.perf_counter()
        library.embedder.embed([question])
        seconds.append(time.perf_counter() - started)
    results = {"(query embedding)": percentiles(seconds)}
    for name in rankings:
        ranking = Ranking(*RANKINGS[name])
        library.search(questions[0], top_k, None, None, ranking, tenant=tenant)
        seconds = []
        for question in questions:
            started = time.perf_counter()
            library.search(question, top_k, None, None, ranking, tenant=tenant)
            seconds.append(time.perf_counter() - started)
        results[name] = percentiles(seconds)
    return results


def report(rows: list[dict], args: argparse.Namespace) -> None:
    """Print the table of `rows` and write them with the settings and the load average."""
    load = os.getloadavg()
    print(f"{args.queries} queries per ranking, top {args.top_k}; load average {load[0]:.1f}")
    print(
        format_grid(
            ["chunks", "ranking", "p50 ms", "p95 ms"],
            [
                [str(r["chunks"]), r["ranking"], f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}"]
                for r in rows
            ],
        )
    )
    out = output_path(Path(args.out), ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"settings": vars(args), "load_average": load, "rows": rows}
    out.write_text(json.dumps(document, indent=1))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300, help="questions timed per ranking")
    parser.add_argument("--rankings", nargs="+", choices=list(RANKINGS), default=list(RANKINGS))
    parser.add_argument("--libraries", help="build each size's library under DIR/<chunks> once")
    parser.add_argument("--top-k", type=int, default=6, help="chunks per search")
    parser.add_argument("--sentences", type=int, default=5, help="sentences per chunk")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(DEFAULT_CACHE), help="BIG-bench cache (fetch.py)")
    parser.add_argument(
        "--tokenizer",
        default="data/models/smollm2-135m-instruct",
        help="the served model's tokenizer folder (chunks are cut by its tokens)",
    )
    parser.add_argument("--out", default=scratch("search_latency"), help="<out>.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers import AutoTokenizer

    from retriever import DEFAULT_PROJECT, EVERY_PROJECT, Embedder, Library, NewDocument, Tenant

    tenant = Tenant(DEFAULT_PROJECT, kv_salt="")  # the library alone: no KV, no salt

    data = Path(args.data)
    sentences = real_sentences(data)
    items = QA_LOADERS["knowledge_conflicts"](data)
    questions = [item.question for item in random.Random(args.seed).sample(items, args.queries)]
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    embedder = Embedder()
    rows = []
    for count in args.chunks:
        with library_folder(args.libraries, count) as folder:
            library = Library(folder, tokenizer, PseudoRandomVectors(embedder.dim))
            started = time.monotonic()
            if library.list(0, 1, tenant=tenant)[1] < count:  # not built yet, or cut short
                texts = chunk_texts(sentences, count, args.sentences, args.seed)
                for start in range(0, count, INGEST_BATCH):
                    batch = texts[start : start + INGEST_BATCH]
                    library.ingest(
                        [NewDocument(f"d{start + n}", text) for n, text in enumerate(batch)],
                        tenant=tenant,
                    )
            stored = len(library.store.chunk_ids(project=EVERY_PROJECT))
            print(f"{count} texts: {stored} chunks in {time.monotonic() - started:.0f} s")
            library.embedder = embedder  # queries are embedded for real
            results = measure(library, questions, args.top_k, args.rankings)
            library.close()
        rows += [{"chunks": stored, "ranking": name, **r} for name, r in results.items()]
        report(rows, args)  # after each size, so a cut run keeps the sizes it finished
    return 0


if __name__ == "__main__":
    sys.exit(main())
