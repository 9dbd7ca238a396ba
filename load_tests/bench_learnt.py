"""TTFT of repeated sent documents on the real server: cold recipe, learnt contexts (behind the
same head or another), library chunks, full prefill.

    python -m load_tests.bench_learnt [--model qwen2.5-coder-0.5b-instruct] [--trials 3]
        [--documents 6] [--document-tokens 500]

One `ragblend serve` with `RAGBLEND_LEARN_CONTEXTS=true` (learnt after 2 sightings) and vLLM's
prefix cache off, so every timed request computes what its mode says rather than reading an
identical earlier prompt's blocks. Each trial sends a fresh set of documents (about
documents x document-tokens tokens of plain pseudo-English) to /v1/chat/completions:

1. ``store``: the first sighting; every chunk misses, so the request computes them in place
   (a prefill) and stores them as they stand: the set is learnt on the spot;
2. ``exact``: the second sighting, behind the same head: its chunks' KV is what a prefill
   computes, reused with nothing recomputed;
3. ``learnt``: the same documents behind another head (a system message), blended with the
   in-context recipe;
4. ``cold``: the same documents in reverse order, blended from the stored entries with the cold
   recipe; a second such request queues that order for learning, and the bench waits until the
   background worker has learnt it (``learn_s``);
5. ``full``: ``blend.mode=full``, a plain prefill of the first prompt;
6. ``library``: as many documents of the same length, other text (the sent ones would be
   recognised as the learnt arrangement), ingested into the library (one chunk each:
   ``RAGBLEND_CHUNK_TOKENS`` is set above the document length) and, once their chunk KV is
   cached behind their neighbours, asked through ``retrieval`` restricted to them: a prompt of
   the same length, blended with the in-context recipe.

Each request asks for one token without streaming, so its latency is its time to first token as
the client sees it. Every reply's ``blend.context`` is checked against the mode. Prints medians
and speed-ups over ``full`` and writes a JSON file.
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

from load_tests.bench_prompts import chunk_token_ids
from load_tests.replica_launcher import (
    Replica,
    add_model_arguments,
    bench_environment,
    running_replicas,
)
from load_tests.report import publish_rows, scratch
from load_tests.stats import ttft_trials

MODES = ("cold", "exact", "learnt", "library", "full")
OTHER_HEAD = "Answer in a few words."
"""The system message of mode ``learnt``: a head other than the one the set was learnt behind."""
CACHE_WAIT_S = 900
LIBRARY_SEEDS = 10_000
"""Seeds of the library mode's documents start here, clear of the sent ones'."""
LEARN_WAIT_S = 900
API_KEY = "bench-key"


def documents_text(tokenizer: Any, count: int, tokens: int, seed: int) -> list[str]:
    """``count`` documents of about ``tokens`` tokens each, different for every seed."""
    return [tokenizer.decode(ids) for ids in chunk_token_ids(tokenizer, count, tokens, seed)]


def ask(client: httpx.Client, documents: list[str], mode: str, trial: int) -> tuple[float, str]:
    """One token over ``documents`` (the ids of library documents in mode ``library``); the
    seconds it took and the context the server reported."""
    question = {"role": "user", "content": f"Trial {trial}: which plan was approved?"}
    head = [{"role": "system", "content": OTHER_HEAD}] if mode == "learnt" else []
    body: dict[str, Any] = {
        "model": "bench",
        "messages": [*head, question],
        "max_tokens": 1,
        "temperature": 0,
    }
    if mode == "library":
        body["retrieval"] = {"document_ids": documents, "top_k": len(documents)}
    else:
        body["documents"] = documents
    if mode == "full":
        body["blend"] = {"mode": "full"}
    started = time.perf_counter()
    reply = client.post("/v1/chat/completions", json=body)
    seconds = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{mode} request: {reply.status_code} {reply.text}")
    return seconds, reply.json()["blend"]["context"]


def until_learnt(replica: Replica, done_before: float) -> float:
    """Seconds until the server has learnt one more arrangement."""
    started = time.monotonic()
    while replica.counter("ragblend_learnt_context_work", outcome="done") <= done_before:
        if replica.counter("ragblend_learnt_context_work", outcome="failed"):
            raise RuntimeError(f"learning failed: see {replica.log}")
        if time.monotonic() - started > LEARN_WAIT_S:
            raise RuntimeError(f"nothing learnt within {LEARN_WAIT_S} s")
        time.sleep(0.5)
    return time.monotonic() - started


def ingest_cached(client: httpx.Client, documents: list[str], trial: int) -> list[str]:
    """``documents`` ingested into the library; their ids once every one's chunk KV is cached."""
    ids = [f"trial{trial}-{index}" for index in range(len(documents))]
    body = {"documents": [{"id": i, "text": text} for i, text in zip(ids, documents, strict=True)]}
    reply = client.post("/v1/documents", json=body)
    if reply.status_code != 200:
        raise RuntimeError(f"ingest: {reply.status_code} {reply.text}")
    deadline = time.monotonic() + CACHE_WAIT_S
    for document_id in ids:
        while (status := client.get(f"/v1/documents/{document_id}").json()["status"]) != "cached":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{document_id} still {status!r} after {CACHE_WAIT_S} s")
            time.sleep(0.5)
    return ids


def run_trial(
    replica: Replica,
    client: httpx.Client,
    documents: list[str],
    library_documents: list[str],
    trial: int,
) -> dict[str, Any]:
    """The timings of one document set, in the order the module docstring gives."""
    timings: dict[str, float] = {}
    done = replica.counter("ragblend_learnt_context_work", outcome="done")
    timings["store"], first = ask(client, documents, "cold", trial)
    timings["exact"], exact = ask(client, documents, "exact", trial)
    timings["learnt"], learnt = ask(client, documents, "learnt", trial)
    timings["cold"], cold = ask(client, documents[::-1], "cold", trial)
    ask(client, documents[::-1], "cold", trial)
    learn_s = until_learnt(replica, done)
    timings["full"], _ = ask(client, documents, "full", trial)
    ids = ingest_cached(client, library_documents, trial)
    timings["library"], library = ask(client, ids, "library", trial)
    contexts = (first, cold, exact, learnt, library)
    if contexts != ("cold", "cold", "exact", "learnt", "library"):
        raise RuntimeError(f"trial {trial}: contexts {contexts} reported")
    print(f"  trial {trial}: {timings} learnt in {learn_s:.1f}s", file=sys.stderr)
    return {"timings": timings, "learn_s": learn_s}


def summary(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode: median and fastest seconds, and the median's speed-up over full prefill."""
    full = statistics.median(trial["timings"]["full"] for trial in trials)
    rows = []
    for mode in ("store", *MODES):
        values = [trial["timings"][mode] for trial in trials]
        speedup = round(full / statistics.median(values), 2)
        rows.append({"mode": mode, **ttft_trials(values), "speedup_vs_full": speedup})
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--documents", type=int, default=6)
    parser.add_argument("--document-tokens", type=int, default=500)
    parser.add_argument("--out", default=scratch("learnt_ttft"), help="<out>.json")
    return parser


def main() -> int:
    from transformers import AutoTokenizer

    args = build_parser().parse_args()
    models_dir = Path(args.models_dir).resolve()
    tokenizer = AutoTokenizer.from_pretrained(models_dir / args.model)
    environment = bench_environment(
        args,
        RAGBLEND_API_KEYS=API_KEY,
        RAGBLEND_LEARN_CONTEXTS="true",
        RAGBLEND_LEARN_CONTEXTS_AFTER="2",
        RAGBLEND_ENABLE_PREFIX_CACHING="false",
        RAGBLEND_MAX_MODEL_LEN=str(args.documents * args.document_tokens * 2 + 1024),
        RAGBLEND_CHUNK_TOKENS=str(min(2048, args.document_tokens + 64)),
    )
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with (
        tempfile.TemporaryDirectory(prefix="bench-learnt-") as folder,
        running_replicas(["learnt"], Path(folder), environment) as (replica,),
        httpx.Client(base_url=replica.url, headers=headers, timeout=900) as client,
    ):
        trials = []
        for trial in range(args.trials):
            documents, library_documents = (
                documents_text(tokenizer, args.documents, args.document_tokens, seed)
                for seed in (trial, LIBRARY_SEEDS + trial)
            )
            try:
                trials.append(run_trial(replica, client, documents, library_documents, trial))
            except Exception:
                print(replica.log.read_text(errors="replace")[-6000:], file=sys.stderr)
                raise
    rows = summary(trials)
    columns = {"mode": "mode", "median_ttft_s": "median TTFT s", "fastest_ttft_s": "fastest s"}
    publish_rows(args, columns | {"speedup_vs_full": "speed-up vs full"}, rows, trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
