"""Ingest throughput: N synthetic passages of about 400 words into the library, passages and
chunks per second, and where the time goes.

    python -m load_tests.bench_ingest --via library --passages 500 --profile /tmp/ingest.prof
    python -m load_tests.bench_ingest --via http --passages 10000 --files 500

``--via library`` drives `retriever.Library.ingest` in this process, ``--batch`` passages per
call, the served model's tokenizer and the bundled MiniLM as a server has them, and times each
stage (`load_tests.ingest_corpus.clock_library`); ``--profile`` writes a cProfile of the run.
``--via http`` starts a real ``ragblend serve`` (the benchmark model, as a user runs it) and
sends the passages as a user would: ``POST /v1/documents`` with ``--batch`` documents per
request, ``--clients`` requests at a time; then ``--files`` more passages as ``POST /v1/files``
uploads (one text file each, ``--clients`` at a time), so the two routes' bytes per second
stand side by side. The time counted is from the first request to the last answer: every
acknowledged document is stored, embedded and searchable by then (its chunk KV is precomputed
in the background afterwards). Passages are synthetic (`load_tests.ingest_corpus.passages`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import platform
import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from load_tests.ingest_corpus import StageClock, clock_library, passages
from load_tests.replica_launcher import add_model_arguments, bench_environment, running_replicas
from load_tests.report import format_table, output_path, scratch, write_json


def _rate(count: float, seconds: float) -> float:
    return round(count / seconds, 2) if seconds > 0 else 0.0


def _summary(route: str, texts: Sequence[str], chunks: int, seconds: float) -> dict[str, Any]:
    size = sum(len(text.encode()) for text in texts)
    return {
        "route": route,
        "passages": len(texts),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "passages_per_s": _rate(len(texts), seconds),
        "chunks_per_s": _rate(chunks, seconds),
        "kib_per_s": _rate(size / 1024, seconds),
    }


def run_library(args: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from engine.models.provision import resolve_model
    from retriever import DEFAULT_PROJECT, Embedder, Library, NewDocument, Tenant

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model, Path(args.models_dir)))
    clock = StageClock()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as folder:
        library = Library(Path(folder), tokenizer, Embedder(dtype=args.embedding_dtype))
        library.embedder.embed(["warm up"])
        clock_library(library, clock)
        profiler = cProfile.Profile() if args.profile else None
        cpu_before, started = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        chunks = 0
        for start in range(0, len(texts), args.batch):
            batch = [NewDocument(None, text) for text in texts[start : start + args.batch]]
            results = library.ingest(batch, tenant=Tenant(DEFAULT_PROJECT, ""))
            chunks += sum(result.num_chunks for result in results)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        seconds = time.perf_counter() - started
        summary = _summary("Library.ingest", texts, chunks, seconds)
        summary["cpu_seconds"] = round(time.process_time() - cpu_before, 2)
        summary["stages"] = clock.report()
        library.close()
    return {"library": summary}


async def _post_documents(client: httpx.AsyncClient, batch: list[str]) -> int:
    body = {"documents": [{"text": text} for text in batch]}
    response = await client.post("/v1/documents", json=body)
    response.raise_for_status()
    return sum(item["num_chunks"] for item in response.json()["data"])


async def _post_file(client: httpx.AsyncClient, number: int, text: str) -> int:
    files = {"file": (f"passage-{number}.txt", text.encode(), "text/plain")}
    response = await client.post("/v1/files", files=files, data={"purpose": "assistants"})
    response.raise_for_status()
    document = await client.get(f"/v1/documents/{response.json()['id']}")
    return int(document.json()["num_chunks"]) if document.status_code == 200 else 0


async def _bounded(clients: int, jobs: list[Any]) -> tuple[int, float]:
    """Run the coroutines `jobs` at most `clients` at a time; their summed result, seconds."""
    gate = asyncio.Semaphore(clients)

    async def one(job: Any) -> int:
        async with gate:
            return await job

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(job) for job in jobs))
    return sum(counts), time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    """CPU time (user and system) the process `pid` has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _phase(
    route: str, texts: list[str], clients: int, jobs: list[Any], server_pid: int
) -> dict[str, Any]:
    """One route's summary, with the CPU time the server process spent on it (the gateway
    and its embedder; the engine runs in processes of its own)."""
    cpu_before = _cpu_seconds(server_pid)
    chunks, seconds = await _bounded(clients, jobs)
    summary = _summary(route, texts, chunks, seconds)
    summary["server_cpu_seconds"] = round(_cpu_seconds(server_pid) - cpu_before, 1)
    return summary


async def _drive(
    url: str, server_pid: int, args: argparse.Namespace, texts: list[str], files: list[str]
) -> Any:
    timeout = httpx.Timeout(1800)
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
        batches = [texts[start : start + args.batch] for start in range(0, len(texts), args.batch)]
        jobs = [_post_documents(client, batch) for batch in batches]
        results = {
            "documents": await _phase("/v1/documents", texts, args.clients, jobs, server_pid)
        }
        if files:
            jobs = [_post_file(client, number, text) for number, text in enumerate(files)]
            results["files"] = await _phase("/v1/files", files, args.clients, jobs, server_pid)
    phases = list(results.values())
    total = _summary(
        "both", texts + files, sum(p["chunks"] for p in phases), sum(p["seconds"] for p in phases)
    )
    total["server_cpu_seconds"] = round(sum(p["server_cpu_seconds"] for p in phases), 1)
    return {**results, "total": total}


def run_http(args: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    files = texts[len(texts) - args.files :] if args.files else []
    documents = texts[: len(texts) - len(files)]
    environment = bench_environment(
        args,
        RAGBLEND_MAX_DOCUMENTS_PER_REQUEST=str(args.batch),
        RAGBLEND_EMBEDDING_DTYPE=args.embedding_dtype,
        RAGBLEND_KV_CACHE_GIB=str(args.kv_cache_gib),
        RAGBLEND_CHUNK_CACHE_MEMORY_GIB=str(args.kv_cache_gib),
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-ingest-") as folder,
        running_replicas(["ingest"], Path(folder), environment) as (replica,),
    ):
        return asyncio.run(_drive(replica.url, replica.process.pid, args, documents, files))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=("library", "http"), default="http")
    parser.add_argument("--passages", type=int, default=1000, help="documents and files in all")
    parser.add_argument("--files", type=int, default=0, help="of which sent as /v1/files")
    parser.add_argument("--words", type=int, default=400, help="words per passage")
    parser.add_argument("--batch", type=int, default=100, help="documents per request")
    parser.add_argument("--clients", type=int, default=4, help="requests at a time (http)")
    parser.add_argument(
        "--embedding-dtype", default="auto", help="RAGBLEND_EMBEDDING_DTYPE (library)"
    )
    parser.add_argument("--kv-cache-gib", type=float, default=1.0, help="the server's (http)")
    parser.add_argument("--profile", help="write a cProfile of the run here (library)")
    parser.add_argument("--out", default=scratch("ingest"))
    add_model_arguments(parser)
    args = parser.parse_args(argv)
    texts = list(passages(args.passages, args.words))
    run = run_library if args.via == "library" else run_http
    started = time.perf_counter()
    results = run(args, texts)
    settings = {key: value for key, value in vars(args).items() if key != "out"}
    document = {
        "settings": settings,
        "machine": {"cpus": _cpus(), "platform": platform.platform()},
        "wall_seconds_with_startup": round(time.perf_counter() - started, 1),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "results": results,
    }
    write_json(output_path(args.out, ".json"), document)
    for summary in results.values():
        rows = [(key, str(value)) for key, value in summary.items() if key != "stages"]
        rows += [(stage, f"{t['seconds']} s") for stage, t in summary.get("stages", {}).items()]
        print(format_table(rows), "\n")
    print(json.dumps({"out": str(output_path(args.out, ".json"))}))


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
