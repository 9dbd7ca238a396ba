"""The cost of attention per recomputed token, by where the recomputed tokens lie.

A blend passes vLLM's CPU attention kernel one sequence per run of adjacent recomputed tokens
(`engine/connector/paged_attention.py`). This times that kernel on one layer's shapes for a
full prefill's queries and for a share of them chosen in different patterns (scattered single
tokens, the same skewed toward the end of the prompt, runs of consecutive tokens), so the cost
per query can be compared with full prefill's, and beside it torch's fused SDPA kernel over the
same K/V with each query's exact mask (`engine/blend/attention.py`), which the blend uses where
vLLM's kernel is the slower (`paged_kernel_preferred`).

    python -m load_tests.bench_paged_attention --tokens 3200 --share 0.12
    python -m load_tests.bench_paged_attention --tokens 8192 --share 0.55 --dtype float32
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from load_tests.report import output_path, scratch

BLOCK = 128


def scattered(num_tokens: int, count: int, generator: torch.Generator) -> Tensor:
    return torch.randperm(num_tokens, generator=generator)[:count]


def skewed_late(num_tokens: int, count: int, generator: torch.Generator) -> Tensor:
    """Positions drawn with weight growing with position, as a question's attention to the
    chunks nearest it would draw them."""
    weights = torch.arange(1, num_tokens + 1, dtype=torch.float64)
    return torch.multinomial(weights, count, replacement=False, generator=generator)


def runs_of(length: int) -> Callable[[int, int, torch.Generator], Tensor]:
    def runs(num_tokens: int, count: int, generator: torch.Generator) -> Tensor:
        starts = torch.randperm(num_tokens // length, generator=generator)[: count // length]
        return (starts[:, None] * length + torch.arange(length)).flatten()

    return runs


PATTERNS: dict[str, Callable[[int, int, torch.Generator], Tensor]] = {
    "scattered": scattered,
    "scattered, skewed late": skewed_late,
    "runs of 4": runs_of(4),
    "runs of 8": runs_of(8),
    "runs of 16": runs_of(16),
}


def _cache(
    args: argparse.Namespace, dtype: torch.dtype
) -> tuple[Tensor, Tensor, str, tuple[Tensor, Tensor]]:
    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    isa = _get_attn_isa(dtype, BLOCK, args.head_dim, "auto")
    blocks = (args.tokens + BLOCK - 1) // BLOCK
    cache = torch.zeros(blocks, args.kv_heads, BLOCK, 2 * args.head_dim, dtype=dtype)
    key_cache, value_cache = cache.view(blocks, args.kv_heads, 2 * BLOCK, -1).chunk(2, dim=2)
    keys = torch.randn(args.tokens, args.kv_heads, args.head_dim, dtype=dtype)
    values = torch.randn_like(keys)
    slots = torch.arange(args.tokens)
    ops.cpu_attn_reshape_and_cache(keys, values, key_cache, value_cache, slots, isa, 1.0, 1.0)
    return cache, torch.arange(blocks, dtype=torch.int32), isa, (keys, values)


def _seconds(call: Callable[[], Any], repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from engine.blend.attention import selective_attention
    from engine.connector.paged_attention import attend_runs, position_runs

    dtype = getattr(torch, args.dtype)
    cache, block_ids, isa, (keys, values) = _cache(args, dtype)
    queries = torch.randn(args.tokens, args.heads, args.head_dim, dtype=dtype)
    scale = args.head_dim**-0.5
    generator = torch.Generator().manual_seed(args.seed)
    count = int(args.share * args.tokens)
    patterns = {"full prefill": torch.arange(args.tokens)}
    patterns |= {
        name: torch.sort(pick(args.tokens, count, generator)).values
        for name, pick in PATTERNS.items()
    }
    rows = []
    for name, positions in patterns.items():
        q = queries[positions]

        def attend(q: Tensor = q, positions: Tensor = positions) -> Tensor:
            return attend_runs(q, positions, cache, block_ids, scale=scale, isa=isa)

        tail = name == "full prefill"  # every position: the one causal pass the blend takes

        def sdpa(q: Tensor = q, positions: Tensor = positions, tail: bool = tail) -> Tensor:
            return selective_attention(q, keys, values, positions, scale, tail)

        seconds, sdpa_seconds = _seconds(attend, args.repeats), _seconds(sdpa, args.repeats)
        rows.append(
            {
                "pattern": name,
                "queries": positions.numel(),
                "runs": position_runs(positions)[1].numel(),
                "mean_position": round(float(positions.double().mean()) / args.tokens, 3),
                "us_per_query": round(seconds / positions.numel() * 1e6, 2),
                "sdpa_us_per_query": round(sdpa_seconds / positions.numel() * 1e6, 2),
            }
        )
    full = rows[0]["us_per_query"]
    for row in rows:
        row["vs_full"] = round(row["us_per_query"] / full, 2)
    return rows


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=3200, help="prompt length")
    parser.add_argument("--share", type=float, default=0.12, help="share of tokens recomputed")
    parser.add_argument("--heads", type=int, default=14, help="query heads (0.5B model: 14)")
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=scratch("paged_attention"), help="<out>.json")
    return parser


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    if not 0 < args.share <= 1 or args.tokens < 32:
        parser.error("--share must be in (0, 1] and --tokens at least 32")
    rows = measure(args)
    header = ("queries", 8), ("runs", 6), ("mean pos", 9), ("us/query", 9), ("vs full", 8)
    header += (("SDPA us/q", 10),)
    print(f"{'pattern':24} " + " ".join(f"{name:>{width}}" for name, width in header))
    for row in rows:
        print(
            f"{row['pattern']:24} {row['queries']:8d} {row['runs']:6d} "
            f"{row['mean_position']:9.3f} {row['us_per_query']:9.2f} {row['vs_full']:8.2f} "
            f"{row['sdpa_us_per_query']:10.2f}"
        )
    path = output_path(Path(args.out), ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
