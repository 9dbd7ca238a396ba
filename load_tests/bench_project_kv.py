"""TTFT of chunks by who cached them: projects' chunk KV is salted apart unless they share it.

    python -m load_tests.bench_project_kv [--model qwen2.5-coder-0.5b-instruct] [--trials 5]
        [--documents 4] [--document-tokens 300]

One `ragblend serve` with four projects' keys: ``alpha`` and ``beta`` isolated (their chunk KV
salted with their names), ``gamma`` and ``delta`` sharing (``RAGBLEND_SHARED_KV_PROJECTS``), and
vLLM's prefix cache off, so every timed request is blended from the chunk store and computes what
its chunks' lookups say rather than reading an identical earlier prompt's blocks. Each trial
sends a fresh set of documents (about documents x document-tokens tokens of pseudo-English) to
/v1/chat/completions, in this order:

1. ``cold``: an isolated project's first send: every chunk computed and stored;
2. ``other_cached``: the other isolated project, same documents: its salt misses them all;
3. ``own_hit``: the first project again: every chunk read from the store;
4. ``cold_shared``: a sharing project's first send (no one with its salt has sent them);
5. ``sharer_cached``: the other sharing project: every chunk hits what its partner stored.

Trials alternate which project of each pair goes first. Each request asks for one token without
streaming, so its latency is its time to first token as the client sees it; each reply's chunk
hits and misses are checked against its step. Prints medians and their ratios to ``cold`` and
writes a JSON file. Expected: ``other_cached`` about ``cold``, ``sharer_cached`` about
``own_hit``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from load_tests.bench_learnt import documents_text
from load_tests.replica_launcher import (
    Replica,
    add_model_arguments,
    bench_environment,
    running_replicas,
)
from load_tests.report import publish_rows, scratch
from load_tests.stats import ttft_trials

STEPS = ("cold", "other_cached", "own_hit", "cold_shared", "sharer_cached")
HITS = {"cold": False, "other_cached": False, "own_hit": True, "cold_shared": False}
"""Whether each step's chunks all hit (else all miss); ``sharer_cached`` hits."""
ISOLATED, SHARING = ("alpha", "beta"), ("gamma", "delta")


def key(project: str) -> str:
    return f"bench-{project}-key"


def ask(replica: Replica, project: str, documents: list[str], step: str) -> float:
    """One token over ``documents`` as ``project``; the seconds it took. Raises unless every
    chunk hit (or every chunk missed) as ``step`` expects."""
    body: dict[str, Any] = {
        "model": "bench",
        "messages": [{"role": "user", "content": "Which plan did the council approve?"}],
        "documents": documents,
        "blend": {"mode": "blend"},
        "max_tokens": 1,
        "temperature": 0,
    }
    headers = {"Authorization": f"Bearer {key(project)}"}
    started = time.perf_counter()
    reply = httpx.post(
        f"{replica.url}/v1/chat/completions", json=body, headers=headers, timeout=900
    )
    seconds = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{step} ({project}): {reply.status_code} {reply.text}")
    blend = reply.json()["blend"]
    expected = (len(documents), 0) if HITS.get(step, True) else (0, len(documents))
    if (blend["chunks_hit"], blend["chunks_missed"]) != expected:
        raise RuntimeError(f"{step} ({project}): expected (hits, misses) {expected}, got {blend}")
    return seconds


def run_trial(replica: Replica, documents: list[str], trial: int) -> dict[str, float]:
    """The timings of one document set, in the order the module docstring gives."""
    first, second = ISOLATED if trial % 2 == 0 else ISOLATED[::-1]
    sharer, partner = SHARING if trial % 2 == 0 else SHARING[::-1]
    order = (
        ("cold", first),
        ("other_cached", second),
        ("own_hit", first),
        ("cold_shared", sharer),
        ("sharer_cached", partner),
    )
    timings = {step: ask(replica, project, documents, step) for step, project in order}
    print(f"  trial {trial}: {timings}", file=sys.stderr)
    return timings


def summary(trials: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Per step: median and fastest seconds, and the median's ratio to the cold median."""
    cold = statistics.median(trial["cold"] for trial in trials)
    rows = []
    for step in STEPS:
        values = [trial[step] for trial in trials]
        ratio = round(statistics.median(values) / cold, 2)
        rows.append({"step": step, **ttft_trials(values), "ratio_to_cold": ratio})
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--document-tokens", type=int, default=300)
    parser.add_argument("--out", default=scratch("project_kv_ttft"), help="<out>.json")
    return parser


def main() -> int:
    from transformers import AutoTokenizer

    args = build_parser().parse_args()
    models_dir = Path(args.models_dir).resolve()
    tokenizer = AutoTokenizer.from_pretrained(models_dir / args.model)
    environment = bench_environment(
        args,
        RAGBLEND_API_KEYS=",".join(f"{key(p)}:{p}" for p in (*ISOLATED, *SHARING)),
        RAGBLEND_SHARED_KV_PROJECTS=",".join(SHARING),
        RAGBLEND_ENABLE_PREFIX_CACHING="false",
        RAGBLEND_MAX_MODEL_LEN=str(args.documents * args.document_tokens * 2 + 1024),
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-project-kv-") as folder,
        running_replicas(["projects"], Path(folder), environment) as (replica,),
    ):
        trials = []
        for trial in range(args.trials):
            documents = documents_text(tokenizer, args.documents, args.document_tokens, trial)
            try:
                trials.append(run_trial(replica, documents, trial))
            except Exception:
                print(replica.log.read_text(errors="replace")[-6000:], file=sys.stderr)
                raise
    rows = summary(trials)
    columns = {"step": "step", "median_ttft_s": "median TTFT s", "fastest_ttft_s": "fastest s"}
    publish_rows(args, columns | {"ratio_to_cold": "ratio to cold"}, rows, trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
