"""One streamed request of `load_tests.bench_peer` and what it measured, on either server.

``load_tests.client`` measures TTFT for load runs; a comparison with vLLM's server also needs
every answer's text (for F1), the time of its last token (time per output token), tool-call
deltas counted as tokens (the tool catalog phase) and ragblend's ``blend`` and ``retrieval``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from load_tests import sse
from load_tests.eval.metrics import f1
from load_tests.peer_summary import first_line, tpot
from load_tests.peer_traffic import PeerRequest


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed request: TTFT (first content or tool-call delta), TPOT, text, usage and
    ragblend's ``blend`` and ``retrieval``; a failure becomes ``error``, never an exception."""
    endpoint = "chat" if "chat" in path else "completions"
    started = time.perf_counter()
    first = last = None
    record: dict[str, Any] = {
        "answer": "",
        "tool_calls": 0,
        "blend": None,
        "retrieval": None,
        "output_tokens": 0,
        "prompt_tokens": 0,
        "cached_tokens": 0,
    }
    try:
        with client.stream("POST", path, json=body) as response:
            if not response.is_success:
                response.read()
                return {**record, "error": f"{response.status_code} {response.text[:300]}"}
            for line in response.iter_lines():
                payload = sse.parse_sse_data(line)
                if payload is None or payload == sse.STREAM_DONE:
                    continue
                chunk = sse.decode_chunk(payload)
                if sse.chunk_has_error(chunk):
                    return {**record, "error": f"stream: {chunk['error']}"}
                text = sse.chunk_text(chunk, endpoint)
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                calls = delta.get("tool_calls") or []
                if text or calls:
                    last = time.perf_counter()
                    first = first or last
                    record["answer"] += text
                    record["tool_calls"] += len(calls)
                tokens = sse.chunk_completion_tokens(chunk)
                record["output_tokens"] = tokens if tokens is not None else record["output_tokens"]
                usage = sse.chunk_prompt_usage(chunk)
                if usage is not None:
                    record["prompt_tokens"], record["cached_tokens"] = usage
                for key in ("blend", "retrieval"):
                    record[key] = chunk.get(key) or record[key]
    except (httpx.HTTPError, ValueError) as error:
        return {**record, "error": f"{type(error).__name__}: {error}"}
    ttft = None if first is None else first - started
    span = (None, None) if first is None else (first - started, last - started)
    return {
        **record,
        "error": None,
        "latency_s": time.perf_counter() - started,
        "ttft_s": ttft,
        "tpot_s": tpot(*span, record["output_tokens"]),
    }


def send(
    client: httpx.Client, server: str, request: PeerRequest, max_tokens: int
) -> dict[str, Any]:
    """``request`` in ``server``'s form, greedy, streamed; its record with the answer's F1."""
    body = {
        **getattr(request, server),
        "model": "bench",
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **({"min_tokens": max_tokens} if request.full_length else {}),
    }
    record = stream(client, request.path, body)
    score = f1(first_line(record["answer"]), request.answers) if request.answers else None
    return {"phase": request.phase, "key": request.key, "server": server, **record, "f1": score}


def settled(client: httpx.Client, wait_s: float = 900.0) -> float:
    """Wait until ragblend has recomputed behind the prefix every chunk its first sightings
    stored in their own context (work it does only while idle, so it must not run beside
    vLLM's block); the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < wait_s:
        text = client.get("/metrics").text
        outcomes = {
            sample.labels.get("outcome"): sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "ragblend_settled_chunks"
            for sample in family.samples
            if sample.name.endswith("_total")
        }
        if outcomes.get("queued", 0) <= outcomes.get("done", 0) + outcomes.get("failed", 0):
            break
        time.sleep(0.2)
    return time.perf_counter() - started
