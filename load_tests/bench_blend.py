"""TTFT of full prefill, vLLM prefix caching, reuse and blend, side by side in one engine.

    python -m load_tests.bench_blend [--model qwen2.5-coder-0.5b-instruct] [--requests 5]

Each phase starts one engine in a subprocess: ``memory`` (chunk KV served from the memory tier)
runs every mode; ``disk`` (a memory tier too small to hold a chunk) runs full and blend at 0.15.
Every prompt is the fixed prefix, the same chunks in a new order, and a question; all chunks are
stored before timing. ``full`` uses a fresh cache salt per request (no reuse at all); ``prefix``
is a plain request with vLLM's prefix cache; blend modes use fresh salts too, so only chunk
caches help them. Writes a JSON file and a PNG plot; prints a table of medians and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from load_tests.report import output_path

MODES: dict[str, tuple[str, float]] = {
    "full": ("full", 1.0),
    "prefix": ("full", 1.0),
    "reuse": ("reuse", 0.0),
    "blend@0.05": ("blend", 0.05),
    "blend@0.1": ("blend", 0.1),
    "blend@0.15": ("blend", 0.15),
    "blend@0.2": ("blend", 0.2),
    "blend@0.3": ("blend", 0.3),
}
PHASE_MODES = {"memory": list(MODES), "disk": ["full", "blend@0.15"]}
MEMORY_TIER_BYTES = {"memory": 4 << 30, "disk": 1 << 20}


async def time_to_first_token(engine: Any, prompt: Any, mode: str, salt: str | None) -> float:
    """Seconds until ``engine`` streams the first token of ``prompt`` in ``mode``."""
    from vllm import SamplingParams

    from engine.contract import BlendPlan

    blend_mode, ratio = MODES[mode]
    extra = BlendPlan(blend_mode, ratio, prompt.spans).extra_args()
    params = SamplingParams(max_tokens=1, temperature=0, extra_args=extra)
    started = time.perf_counter()
    async for _ in engine.generate(salt or "bench", prompt.token_ids, params, salt):
        break
    return time.perf_counter() - started


async def _phase(args: argparse.Namespace, phase: str, workdir: Path) -> dict[str, list[float]]:
    from load_tests.bench_prompts import QUESTION, chunk_token_ids, shuffled_prompts
    from load_tests.engine_setup import start_engine

    started = start_engine(
        args.model,
        Path(args.models_dir),
        workdir,
        max_model_len=args.chunks * args.chunk_tokens + 512,
        memory_bytes=MEMORY_TIER_BYTES[phase],
    )
    engine, tokenizer, prefix = started.engine, started.tokenizer, started.prefix
    chunks = chunk_token_ids(tokenizer, args.chunks, args.chunk_tokens)
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    warm = shuffled_prompts(prefix, chunks, question, 1, seed=99)[0]
    await time_to_first_token(engine, warm, "blend@0.15", "warm")
    await asyncio.to_thread(time.sleep, 2)  # let the disk tier finish writing
    timings: dict[str, list[float]] = {mode: [] for mode in PHASE_MODES[phase]}
    for index, prompt in enumerate(shuffled_prompts(prefix, chunks, question, args.requests, 1)):
        for mode in timings:
            salt = None if mode == "prefix" else f"{phase}-{mode}-{index}"
            timings[mode].append(await time_to_first_token(engine, prompt, mode, salt))
            print(f"  {phase} {index} {mode}: {timings[mode][-1]:.3f}s", file=sys.stderr)
    engine.shutdown()
    return timings


def _run_phase_in_subprocess(args: argparse.Namespace, phase: str) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{phase}-") as workdir:
        output = Path(workdir) / "timings.json"
        command = [sys.executable, "-m", "load_tests.bench_blend", "--phase", phase]
        command += ["--phase-output", str(output), *sys.argv[1:]]
        subprocess.run(command, check=True)
        return json.loads(output.read_text())


def mode_summary(timings: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Per mode: its median TTFT, the speed-up of that median over ``full``, and the samples."""
    full = statistics.median(timings["full"])
    rows = []
    for mode, values in timings.items():
        median = statistics.median(values)
        rows.append(
            {
                "mode": mode,
                "median_ttft_s": round(median, 4),
                "speedup_vs_full": round(full / median, 2),
                "samples": [round(value, 4) for value in values],
            }
        )
    return rows


def _summary(results: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    return [
        {"phase": phase, **row}
        for phase, timings in results.items()
        for row in mode_summary(timings)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=512)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--out", default="docs/bench/blend_ttft")
    parser.add_argument("--phase", choices=list(PHASE_MODES), help=argparse.SUPPRESS)
    parser.add_argument("--phase-output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        with tempfile.TemporaryDirectory(prefix="bench-engine-") as workdir:
            timings = asyncio.run(_phase(args, args.phase, Path(workdir)))
        Path(args.phase_output).write_text(json.dumps(timings))
        return 0
    results = {phase: _run_phase_in_subprocess(args, phase) for phase in PHASE_MODES}
    rows = _summary(results)
    from load_tests.bench_plot import plot_ttft, print_table

    print_table(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if not k.startswith("phase")}
    output_path(out, ".json").write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
    plot_ttft(
        rows, output_path(out, ".png"), title=f"{args.model}, {args.chunks}x{args.chunk_tokens}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
