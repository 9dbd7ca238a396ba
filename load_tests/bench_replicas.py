"""Replicas behind nginx (issue 14): the RAG load test through the front, 1 replica vs 2.

    nice -n 10 .venv/bin/python -m load_tests.bench_replicas --duration 60

Each phase (1 replica, then 2) gets a fresh PostgreSQL cluster (load_tests/postgres_launcher.py)
and a fresh Redis; its replicas serve SmolLM2 from data dirs of their own, share the library
through RAGBLEND_DATABASE_URL and chunk KV through the Redis tier, and sit behind Debian's nginx
running docker/nginx.conf (load_tests/nginx_front.py). The RAG load test (load_tests/rag_load.py,
blend mode) runs through the front. Per phase: requests/s, TTFT, how requests split over the
replicas, the chunk hit ratio, and the cross-replica hits: chunks a replica read from Redis because
another replica had computed them (its own are on its own disk). With 2 replicas it then ingests
fresh documents on A directly and asks B until B's own index cites each (visible) and until B's
answer reuses its chunk KV (first hit). Writes one JSON file and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from load_tests.nginx_front import running_front
from load_tests.postgres_launcher import running_postgres
from load_tests.redis_launcher import running_redis
from load_tests.replica_launcher import REPO, Replica, running_replicas
from load_tests.report import RESULTS_DIR

COUNTERS = {
    "chunk_hits": ("ragblend_blend_chunks", {"result": "hit"}),
    "chunk_misses": ("ragblend_blend_chunks", {"result": "miss"}),
    "redis_hits": ("ragblend_chunk_store_hits", {"tier": "redis"}),
    "precomputed": ("ragblend_precomputed_chunks", {}),
    "chat_requests": ("ragblend_requests", {"route": "/v1/chat/completions"}),
}
FOLLOW_GUARD_SECONDS = 60.0
FOLLOW_ROLES = ("harbour master", "lighthouse keeper", "ferry captain", "bell ringer", "archivist")
FOLLOW_PLACES = ("Quillmarsh", "Tarnwick", "Ostrevale", "Brindlecombe", "Yarrowmoor")


def counters(replica: Replica) -> dict[str, float]:
    return {name: replica.counter(family, **labels) for name, (family, labels) in COUNTERS.items()}


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in after}


def run_load(front: str, args: argparse.Namespace, json_out: Path) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "load_tests.rag_load", "--url", front, "--modes", "blend",
        "--documents", str(args.documents), "--concurrency", str(args.concurrency),
        "--duration", str(args.duration), "--warmup", str(args.warmup),
        "--json-out", str(json_out),
    ]  # fmt: skip
    subprocess.run(command, cwd=REPO, check=True)
    return json.loads(json_out.read_text())["modes"]["blend"]


def ask(replica: Replica, question: str) -> dict[str, Any]:
    body = {
        "model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 1,
        "retrieval": {"top_k": 1},
    }
    reply = httpx.post(f"{replica.url}/v1/chat/completions", json=body, timeout=120)
    reply.raise_for_status()
    return reply.json()


def follow_times(first: Replica, second: Replica, count: int) -> list[dict[str, float]]:
    """Per fresh document ingested on `first`: seconds until `second` cites it, and until
    `second` answers with its chunk KV reused (no chunk missed)."""
    times = []
    for role, place in list(zip(FOLLOW_ROLES, FOLLOW_PLACES, strict=True))[:count]:
        text = f"The {role} of {place} is Oda Brennick, who has held the post for nine years."
        document = {"id": f"follow-{place}-{secrets.token_hex(3)}", "text": text}
        question = f"Who is the {role} of {place}?"
        start = time.monotonic()
        reply = httpx.post(f"{first.url}/v1/documents", json={"documents": [document]}, timeout=60)
        reply.raise_for_status()
        visible_s = None
        while time.monotonic() - start < FOLLOW_GUARD_SECONDS:
            answer = ask(second, question)
            cited = [source["document_id"] for source in answer["retrieval"]] == [document["id"]]
            if cited and visible_s is None:
                visible_s = time.monotonic() - start
            if cited and answer["blend"]["chunks_missed"] == 0:
                times.append({"visible_s": visible_s, "first_hit_s": time.monotonic() - start})
                break
        else:
            raise RuntimeError(f"B never reused the KV of {document['id']}")
    return times


def phase(count: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    names = ["A", "B", "C", "D"][:count]
    with ExitStack() as stack:
        postgres = stack.enter_context(running_postgres())
        redis_url = stack.enter_context(running_redis(folder / "redis"))
        environment = {
            "RAGBLEND_MODEL": "smollm2-135m-instruct",
            "RAGBLEND_MODELS_DIR": str(args.models_dir),
            "RAGBLEND_DATABASE_URL": postgres.url,
            "RAGBLEND_CHUNK_CACHE_REDIS_URL": redis_url,
            "RAGBLEND_CHUNK_CACHE_SECRET": secrets.token_hex(32),
            "RAGBLEND_API_KEYS": "",
            "RAGBLEND_KV_CACHE_GIB": "1",
            "RAGBLEND_MAX_MODEL_LEN": "2048",
            "RAGBLEND_LOG_LEVEL": "warning",
        }
        replicas = stack.enter_context(running_replicas(names, folder, environment))
        front = stack.enter_context(running_front([r.address for r in replicas], folder / "nginx"))
        before = [counters(replica) for replica in replicas]
        load = run_load(front, args, folder / "rag_load.json")
        per_replica = {
            replica.name: difference(counters(replica), start)
            for replica, start in zip(replicas, before, strict=True)
        }
        result: dict[str, Any] = {"replicas": count, "load": load, "per_replica": per_replica}
        totals = {name: sum(row[name] for row in per_replica.values()) for name in COUNTERS}
        lookups = totals["chunk_hits"] + totals["chunk_misses"]
        result["chunk_hit_ratio"] = totals["chunk_hits"] / lookups if lookups else None
        result["cross_replica_hit_ratio"] = totals["redis_hits"] / lookups if lookups else None
        if count > 1:
            result["follow"] = follow_times(replicas[0], replicas[1], args.follow)
    return result


def summary(phases: list[dict[str, Any]]) -> str:
    lines = []
    for row in phases:
        load = row["load"]
        split = {name: int(c["chat_requests"]) for name, c in row["per_replica"].items()}
        lines.append(
            f"{row['replicas']} replica(s): {load['ok_requests_per_s']:.2f} req/s, TTFT p50 "
            f"{load['ttft_p50_ms']:.0f} ms p95 {load['ttft_p95_ms']:.0f} ms, "
            f"{load['requests_failed']} failed, chat requests per replica {split}, chunk hit "
            f"ratio {row['chunk_hit_ratio']:.3f}, cross-replica "
            f"{row['cross_replica_hit_ratio']:.3f}"
        )
        if "follow" in row:
            visible = [t["visible_s"] for t in row["follow"]]
            first_hit = [t["first_hit_s"] for t in row["follow"]]
            lines.append(
                f"  ingest on A -> cited on B: median {statistics.median(visible):.2f} s, max "
                f"{max(visible):.2f} s; -> first chunk hit on B: median "
                f"{statistics.median(first_hit):.2f} s, max {max(first_hit):.2f} s"
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2", help="phases, e.g. 1,2")
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument(
        "--follow", type=int, default=5, help="documents timed from A to B (at most 5)"
    )
    parser.add_argument("--models-dir", type=Path, default=REPO / "data" / "models")
    parser.add_argument("--json-out", type=Path, default=REPO / RESULTS_DIR / "replicas.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    phases = []
    for count in (int(part) for part in args.replicas.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"ragblend-replicas-{count}-") as folder:
            phases.append(phase(count, args, Path(folder)))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    settings = {key: str(value) for key, value in vars(args).items()}
    args.json_out.write_text(json.dumps({"settings": settings, "phases": phases}, indent=2))
    print(summary(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
