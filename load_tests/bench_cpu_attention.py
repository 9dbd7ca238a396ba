"""The blend's own attention on the CPU in bf16 against the same call converted to fp32 first.

`engine/blend/attention.py` runs torch's fused CPU kernel in the queries' dtype when that is
bf16 (the kernel accumulates in fp32), where it used to convert every block to fp32. Whether
that pays depends on the CPU: with AMX the bf16 kernel is the fast one; on a CPU with AVX2
alone bf16 is emulated (and the engine's ``auto`` dtype is fp32 there, so the served path does
not take it). This times both on one layer's shapes, for the cases the blend takes (every
position, a recomputed share of the prompt scattered over it, a chunk's tokens behind a fixed
prefix), and reports how far apart their outputs are.

    python -m load_tests.bench_cpu_attention --tokens 2048 --geometry 0.5b
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.blend.attention import selective_attention
from load_tests.bench_blend_maths import GEOMETRIES, timed
from load_tests.report import format_grid, output_path, scratch, write_json

Case = tuple[Tensor, Tensor, Tensor, Tensor, bool]
"""q, k, v (bf16, one layer's shapes), the queries' positions, and whether they end the keys."""


def cases(tokens: int, heads: int, kv_heads: int, head_dim: int) -> dict[str, Case]:
    """The cases the blend takes, by name, over one set of keys and values."""
    generator = torch.Generator().manual_seed(0)

    def random(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator).to(torch.bfloat16)

    k, v = random(tokens, kv_heads, head_dim), random(tokens, kv_heads, head_dim)
    every = torch.arange(tokens)
    shapes: dict[str, tuple[Tensor, bool]] = {"every position (causal)": (every, True)}
    for share in (0.15, 0.55):
        picked = torch.randperm(tokens, generator=generator)[: int(tokens * share)]
        shapes[f"{share:.0%} of the prompt, scattered"] = (picked.sort().values, False)
    shapes["a chunk's last quarter behind the rest"] = (every[-tokens // 4 :], True)
    return {
        name: (random(len(positions), heads, head_dim), k, v, positions, tail)
        for name, (positions, tail) in shapes.items()
    }


def compare(tokens: int, geometry: str, repeats: int) -> dict[str, dict[str, Any]]:
    """Per case: the medians of ``repeats`` timed runs of each way (``timed``) in
    milliseconds, fp32's time over bf16's, and the largest difference between the two outputs
    relative to the largest fp32 output."""
    hidden, heads, kv_heads, _layers, _mlp = GEOMETRIES[geometry]
    head_dim = hidden // heads
    scale = head_dim**-0.5
    results = {}
    for name, (q, k, v, positions, tail) in cases(tokens, heads, kv_heads, head_dim).items():
        attend = partial(selective_attention, query_positions=positions, scale=scale, tail=tail)
        ways: dict[str, Callable[[], Tensor]] = {
            "bf16": partial(attend, q, k, v),
            "fp32": partial(_in_fp32, attend, q, k, v),
        }
        times = timed(ways, torch.device("cpu"), repeats)
        medians = {way: statistics.median(runs) for way, runs in times.items()}
        outputs = {way: call() for way, call in ways.items()}
        reference = outputs["fp32"].float()
        difference = (outputs["bf16"].float() - reference).abs().max() / reference.abs().max()
        results[name] = {
            "queries": q.shape[0], "bf16_ms": medians["bf16"], "fp32_ms": medians["fp32"],
            "fp32_over_bf16": medians["fp32"] / medians["bf16"],
            "max_relative_difference": float(difference),
        }  # fmt: skip
    return results


def _in_fp32(attend: Callable[..., Tensor], q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """What the CPU path did before: every input converted to fp32, the output back to bf16."""
    return attend(q.float(), k.float(), v.float()).to(torch.bfloat16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES), default="0.5b")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=scratch("cpu_attention"), help="<out>.json")
    args = parser.parse_args()
    results = compare(args.tokens, args.geometry, args.repeats)
    rows = [
        (name, str(row["queries"]), f"{row['bf16_ms']:.1f} ms", f"{row['fp32_ms']:.1f} ms",
         f"{row['fp32_over_bf16']:.2f}x", f"{row['max_relative_difference']:.2%}")
        for name, row in results.items()
    ]  # fmt: skip
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"{args.geometry} geometry, one layer, {args.tokens} keys, CPU {capability}")
    header = ("case", "queries", "bf16", "fp32", "fp32/bf16", "max diff")
    print(format_grid(header, rows))
    settings = {**vars(args), "cpu_capability": capability, "threads": torch.get_num_threads()}
    write_json(output_path(Path(args.out), ".json"), {"settings": settings, "results": results})


if __name__ == "__main__":
    main()
