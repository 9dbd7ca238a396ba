"""TTFT over context lengths and chunk counts, every mode side by side in one in-process engine.

    python -m load_tests.bench_sweep [--model qwen2.5-coder-0.5b-instruct]
        [--contexts 1024,2048,4096,8192] [--chunk-counts 2,4,8]
        [--modes full,reuse,blend@0.15,blend@0.1/metric=probe] [--requests 3]
        [--out load_tests/results/ttft_sweep]

A grid point is a context length L and a chunk count c: prompts are the fixed prefix, c chunks of
L // c tokens in a new order, and a question. A warm blended request stores each point's chunks
before timing; then every prompt runs in every mode in turn, with fresh cache salts as in
``bench_blend``. Writes a JSON file and two PNG plots; prints a table of medians and speed-ups.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from load_tests.bench_blend import mode_summary, parse_modes, time_to_first_token
from load_tests.report import output_path, scratch

MIN_CHUNK_TOKENS = 16
QUESTION_MARGIN_TOKENS = 512  # the prefix and the question, on top of the largest context


@dataclass(frozen=True)
class GridPoint:
    context_tokens: int
    chunks: int

    @property
    def chunk_tokens(self) -> int:
        return self.context_tokens // self.chunks

    @property
    def label(self) -> str:
        return f"{self.context_tokens}/{self.chunks}x{self.chunk_tokens}"


def sweep_grid(contexts: list[int], chunk_counts: list[int]) -> list[GridPoint]:
    """Every (context, chunk count) pair whose chunks hold at least ``MIN_CHUNK_TOKENS``."""
    points = (GridPoint(context, count) for context in contexts for count in chunk_counts)
    return [point for point in points if point.chunk_tokens >= MIN_CHUNK_TOKENS]


def sweep_rows(results: dict[GridPoint, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """One row per grid point and mode: median TTFT, speed-up over full, samples."""
    return [
        {
            "context_tokens": point.context_tokens,
            "chunks": point.chunks,
            "chunk_tokens": point.chunk_tokens,
            **row,
        }
        for point, timings in results.items()
        for row in mode_summary(timings)
    ]


async def _time_point(
    engine: Any, prompts: list[Any], modes: list[str], point: GridPoint
) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {mode: [] for mode in modes}
    for index, prompt in enumerate(prompts):
        for mode in modes:
            salt = None if mode == "prefix" else f"{point.label}-{mode}-{index}"
            seconds, _ = await time_to_first_token(engine, prompt, mode, salt)
            timings[mode].append(seconds)
            print(f"  {point.label} {index} {mode}: {timings[mode][-1]:.3f}s", file=sys.stderr)
    return timings


async def _sweep(
    args: argparse.Namespace, grid: list[GridPoint], workdir: Path
) -> dict[GridPoint, dict[str, list[float]]]:
    from load_tests.bench_prompts import QUESTION, chunk_token_ids, shuffled_prompts
    from load_tests.engine_setup import start_engine

    max_model_len = max(point.context_tokens for point in grid) + QUESTION_MARGIN_TOKENS
    started = start_engine(args.model, Path(args.models_dir), workdir, max_model_len)
    engine, tokenizer, prefix = started.engine, started.tokenizer, started.prefix
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    results = {}
    for seed, point in enumerate(grid):
        print(f"grid point {point.label} (context/chunks x tokens)", file=sys.stderr)
        chunks = chunk_token_ids(tokenizer, point.chunks, point.chunk_tokens, seed=seed)
        warm = shuffled_prompts(prefix, chunks, question, 1, seed=99)[0]
        await time_to_first_token(engine, warm, "blend@0.15", f"warm-{point.label}")
        prompts = shuffled_prompts(prefix, chunks, question, args.requests, seed=1)
        results[point] = await _time_point(engine, prompts, args.modes, point)
    engine.shutdown()
    return results


def _ints(text: str) -> list[int]:
    return [int(item) for item in text.split(",")]


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--contexts", type=_ints, default=[1024, 2048, 4096, 8192])
    parser.add_argument("--chunk-counts", type=_ints, default=[2, 4, 8])
    parser.add_argument("--modes", type=parse_modes, default=["full", "reuse", "blend@0.15"])
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--out", default=scratch("ttft_sweep"), help="<out>.json and two PNGs")
    return parser


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    grid = sweep_grid(args.contexts, args.chunk_counts)
    if not grid:
        parser.error(f"no grid point has chunks of at least {MIN_CHUNK_TOKENS} tokens")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as workdir:
        rows = sweep_rows(asyncio.run(_sweep(args, grid, Path(workdir))))
    from load_tests.sweep_plot import plot_speedup, plot_ttft, print_sweep_table

    print_sweep_table(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    output_path(out, ".json").write_text(
        json.dumps({"settings": vars(args), "rows": rows}, indent=2)
    )
    plot_ttft(rows, out.with_name(f"{out.name}_ttft.png"), title=args.model)
    plot_speedup(rows, out.with_name(f"{out.name}_speedup.png"), title=args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
