"""Within one ragblend server: sent ``documents`` seen for the first time against the same-size
prompt pasted as plain text, interleaved pair by pair.

Beside ``vllm serve`` a first sighting of sent documents has measured 0.68-0.97x vLLM's TTFT
(docs/benchmarks.md). This splits the gap: a pasted prompt takes the engine's plain path (vLLM's
own prefill, the connector idle), a sent one the gateway's document path and a first sighting
(vLLM's prefill, then the chunks copied out of the paged cache). Their ratio is the documents'
own cost; the server runs at debug level, and the time each sighting's copy-out took is read
from its log. Every request is new text (passages tagged per question and per kind), so nothing
is a hit.

Usage: python -m load_tests.bench_sent_first_sight [--questions 11] [--passages 20] [--out STEM]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from load_tests import peer_traffic as traffic
from load_tests.bench_peer import load_questions
from load_tests.eval.fetch import DEFAULT_CACHE
from load_tests.peer_client import send, settled
from load_tests.replica_launcher import add_model_arguments, bench_environment, running_replicas
from load_tests.report import output_path, scratch, write_json

COPY_OUT = re.compile(r"stored (\d+) chunks of request \S+ from the paged cache in ([\d.]+) ms")


def pair(item: Any) -> tuple[traffic.PeerRequest, traffic.PeerRequest]:
    """The item's passages sent as ``documents``, and as another new text pasted plain."""
    sent = traffic.phase_requests("first_sight", [item])[0]
    passages = [f"[{item.id} pasted, passage {n + 1}] {t}" for n, t in enumerate(item.documents)]
    body = {"messages": [{"role": "user", "content": traffic.pasted(passages, item.question)}]}
    return sent, traffic.PeerRequest("pasted", item.id, traffic.CHAT, body, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--data", default=str(DEFAULT_CACHE))
    parser.add_argument("--questions", type=int, default=11)
    parser.add_argument("--passages", type=int, default=20, help="gold passage + distractors")
    parser.add_argument("--kv-cache-gib", type=int, default=4)
    parser.add_argument("--out", default=scratch("sent_first_sight"), help="<out>.json")
    args = parser.parse_args()
    environment = bench_environment(
        args, RAGBLEND_KV_CACHE_GIB=str(args.kv_cache_gib), RAGBLEND_LOG_LEVEL="debug"
    )
    records: list[dict[str, Any]] = []
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sent-")))
        (replica,) = stack.enter_context(running_replicas(["ragblend"], folder, environment))
        client = stack.enter_context(httpx.Client(base_url=replica.url, timeout=900))
        send(client, "ragblend", traffic.WARM_UP, 2)
        for number, item in enumerate(load_questions(args)):
            for request in pair(item)[:: 1 if number % 2 == 0 else -1]:  # who goes first alternates
                settled(client)
                records.append(send(client, "ragblend", request, 4))
                print(f"  {request.phase} {item.id}: {records[-1]['ttft_s']:.3f} s", flush=True)
        copy_outs = [float(ms) for _, ms in COPY_OUT.findall(replica.log.read_text())]
    ttft = {
        phase: [r["ttft_s"] for r in records if r["phase"] == phase]
        for phase in ("first_sight", "pasted")
    }
    ratios = [p / s for s, p in zip(ttft["first_sight"], ttft["pasted"], strict=True)]
    summary = {
        "ttft_p50_s": {phase: statistics.median(values) for phase, values in ttft.items()},
        "pasted_over_sent_per_pair": sorted(ratios),
        "pasted_over_sent_median": statistics.median(ratios),
        "copy_out_ms": copy_outs,
        "copy_out_median_ms": statistics.median(copy_outs) if copy_outs else None,
    }
    print(
        f"TTFT p50 sent {summary['ttft_p50_s']['first_sight']:.3f} s, pasted "
        f"{summary['ttft_p50_s']['pasted']:.3f} s; pasted / sent per pair, median "
        f"{summary['pasted_over_sent_median']:.2f}; copy-out median "
        f"{summary['copy_out_median_ms']} ms over {len(copy_outs)} sightings"
    )
    write_json(
        output_path(args.out, ".json"),
        {"settings": vars(args), "summary": summary, "records": records},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
