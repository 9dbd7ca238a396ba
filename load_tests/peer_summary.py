"""The figures of `load_tests.bench_peer` (ragblend against vLLM's own server), per phase.

Pure, kept apart so it is tested without servers (tests/unit/test_bench_peer.py): from every
request's record, each server's TTFT p50/p95, time per output token, answer F1, requests/s
meeting a TTFT target and ragblend's chunk hits; the vLLM/ragblend ratios; the printed table.
"""

from __future__ import annotations

import statistics
from typing import Any

from load_tests.stats import percentile

SERVERS = ("vllm", "ragblend")


def first_line(text: str) -> str:
    """What F1 is scored on: the answer's first non-blank line (decoding runs on to max_tokens)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def tpot(first_s: float | None, last_s: float | None, tokens: int) -> float | None:
    """Seconds per output token after the first: (last - first) / (tokens - 1)."""
    if first_s is None or last_s is None or tokens < 2:
        return None
    return (last_s - first_s) / (tokens - 1)


def ratio(vllm: float | None, ragblend: float | None) -> float | None:
    """vLLM's figure over ragblend's: above 1, ragblend took less time."""
    return vllm / ragblend if vllm is not None and ragblend else None


def server_summary(records: list[dict[str, Any]], busy_s: float, target_s: float) -> dict[str, Any]:
    """One server's figures over one phase's records; ``busy_s`` is the wall time of its blocks.

    ``requests_per_s_at_target``: requests whose TTFT met ``target_s`` per second of ``busy_s``
    (requests are sent one at a time, so this is the goodput of a single client)."""
    ok = [record for record in records if record.get("error") is None]
    ttfts = [r["ttft_s"] for r in ok if r.get("ttft_s") is not None]
    tpots = [r["tpot_s"] for r in ok if r.get("tpot_s") is not None]
    scored = [r["f1"] for r in ok if r.get("f1") is not None]
    prompts = [r["prompt_tokens"] for r in ok if r.get("prompt_tokens")]
    met = sum(ttft <= target_s for ttft in ttfts)
    return {
        "requests": len(records),
        "errors": len(records) - len(ok),
        "ttft_p50_s": percentile(ttfts, 50) if ttfts else None,
        "ttft_p95_s": percentile(ttfts, 95) if ttfts else None,
        "tpot_p50_s": percentile(tpots, 50) if tpots else None,
        "f1": statistics.fmean(scored) if scored else None,
        "prompt_tokens_p50": percentile(prompts, 50) if prompts else None,
        "met_target": met,
        "busy_s": busy_s,
        "requests_per_s_at_target": met / busy_s if busy_s > 0 else 0.0,
        "chunks_hit": sum((r.get("blend") or {}).get("chunks_hit", 0) for r in ok),
        "chunks_missed": sum((r.get("blend") or {}).get("chunks_missed", 0) for r in ok),
    }


def phase_summary(
    phase: str, records: list[dict[str, Any]], busy: dict[str, float], target_s: float
) -> dict[str, Any]:
    """Both servers' figures over one phase and the vLLM/ragblend ratios of TTFT and TPOT."""
    each = {
        server: server_summary(
            [r for r in records if r["server"] == server], busy.get(server, 0.0), target_s
        )
        for server in SERVERS
    }
    vllm, ragblend = each["vllm"], each["ragblend"]
    return {
        "phase": phase,
        **each,
        "ttft_p50_ratio": ratio(vllm["ttft_p50_s"], ragblend["ttft_p50_s"]),
        "ttft_p95_ratio": ratio(vllm["ttft_p95_s"], ragblend["ttft_p95_s"]),
        "tpot_p50_ratio": ratio(vllm["tpot_p50_s"], ragblend["tpot_p50_s"]),
    }


def _cell(value: float | None, form: str) -> str:
    return "n/a" if value is None else format(value, form)


TABLE_HEADER = (
    "phase",
    "TTFT p50 vLLM",
    "p50 rb",
    "p95 vLLM",
    "p95 rb",
    "TTFT x",
    "TPOT vLLM ms",
    "TPOT rb ms",
    "TPOT x",
    "F1 vLLM",
    "F1 rb",
    "req/s@T vLLM",
    "req/s@T rb",
    "prompt tok vLLM/rb",
    "hit/miss rb",
    "errors",
)


def table_row(summary: dict[str, Any]) -> tuple[str, ...]:
    """A phase's row of the printed table (seconds, ms per token; x = vLLM / ragblend). The
    prompt tokens show whether both servers read the same prompt: a chat template without tools
    renders none on vLLM, where ragblend writes them into the prompt itself."""
    vllm, ragblend = summary["vllm"], summary["ragblend"]
    tpot_ms = [
        None if s["tpot_p50_s"] is None else s["tpot_p50_s"] * 1000 for s in (vllm, ragblend)
    ]
    return (
        summary["phase"],
        *(_cell(s[key], ".3f") for key in ("ttft_p50_s",) for s in (vllm, ragblend)),
        *(_cell(s[key], ".3f") for key in ("ttft_p95_s",) for s in (vllm, ragblend)),
        _cell(summary["ttft_p50_ratio"], ".2f"),
        *(_cell(value, ".1f") for value in tpot_ms),
        _cell(summary["tpot_p50_ratio"], ".2f"),
        *(_cell(s["f1"], ".3f") for s in (vllm, ragblend)),
        *(_cell(s["requests_per_s_at_target"], ".3f") for s in (vllm, ragblend)),
        "/".join(_cell(s["prompt_tokens_p50"], ".0f") for s in (vllm, ragblend)),
        f"{ragblend['chunks_hit']}/{ragblend['chunks_missed']}",
        f"{vllm['errors']}/{ragblend['errors']}",
    )
