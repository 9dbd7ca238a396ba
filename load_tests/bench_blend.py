"""TTFT of full prefill, vLLM prefix caching, reuse and blend, per chunk-store tier, in one run.

    python -m load_tests.bench_blend [--model qwen2.5-coder-0.5b-instruct] [--requests 5]
        [--phases memory,disk,redis,disk-lossless,redis-lossless,disk-int8,redis-int8]
        [--modes full,reuse,blend@0.15,blend@0.1/metric=qv]

Each phase (`load_tests.bench_tiers.PHASES`) starts one engine in a subprocess: ``memory``
(chunk KV served from the memory tier) runs every mode; ``disk`` and ``redis`` (a memory tier too
small to hold a chunk, so every chunk is streamed from that tier; ``redis`` starts its own
redis-server) run full, reuse and blend at 0.15, raw or in the format named (``-lossless``,
``-int8``). A mode is ``prefix`` or a spec of ``load_tests/eval/strategies.py``
(``blend@0.1/metric=qv``, ``blend@0.2/mass=0.5``). Every prompt is the fixed prefix, the same
chunks in a new order, and a question; all chunks are stored before timing. ``full`` uses a
fresh cache salt per request (no reuse at all); ``prefix`` is a plain request with vLLM's prefix
cache; blend modes use fresh salts too, so only chunk caches help them. Writes a JSON file (with
the slow tiers' measured bytes per token and store counters) and a PNG plot; prints medians,
speed-ups and ratios to memory.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from load_tests.bench_parts import add_part_arguments, run_part, write_part
from load_tests.bench_tiers import ALL_MODES, PHASES, TierPhase, measure_disk, measure_redis
from load_tests.eval.strategies import ModeSpec, parse_mode_spec
from load_tests.report import output_path, scratch, write_json

MODES = ALL_MODES
"""The modes timed by default."""
WRITE_WAIT_S = 120


def mode_spec(mode: str) -> ModeSpec:
    """What a timed mode requests: ``prefix`` is a plain full prefill (vLLM's prefix cache
    serves it), anything else a mode spec."""
    return parse_mode_spec("full" if mode == "prefix" else mode)


def first_token(engine: Any, prompt: Any, mode: str, salt: str | None, on_stats: Any) -> Any:
    """The engine's stream of one greedy token of ``prompt``, blended as ``mode`` says (over
    the default recipe) under cache ``salt`` (None: vLLM's shared prefix cache); ``on_stats``
    gets the worker's statistics."""
    from vllm import SamplingParams

    from engine.contract import BlendPlan, Recipe

    plan = BlendPlan(mode_spec(mode).recipe(Recipe()), prompt.spans)
    params = SamplingParams(max_tokens=1, temperature=0)
    request_id = salt or "bench"
    return engine.generate(request_id, prompt.token_ids, params, plan, on_stats, cache_salt=salt)


async def time_to_first_token(
    engine: Any, prompt: Any, mode: str, salt: str | None
) -> tuple[float, dict[str, int]]:
    """Seconds until ``engine`` streams the first token of ``prompt`` in ``mode``, and the chunk
    store's counters the worker reported with it (empty when nothing was blended)."""
    from engine.contract import BlendStats

    reported: list[BlendStats] = []
    started = time.perf_counter()
    async for output in first_token(engine, prompt, mode, salt, reported.append):
        elapsed = time.perf_counter() - started
        if output.finished:
            return elapsed, reported[-1].store if reported else {}
    raise RuntimeError("the engine finished no output")


async def _phase(args: argparse.Namespace, name: str, workdir: Path) -> dict[str, Any]:
    from load_tests.redis_launcher import running_redis

    phase = PHASES[name]
    secret_hex = secrets.token_hex(32)
    with ExitStack() as stack:
        redis_url = (
            stack.enter_context(running_redis(workdir / "redis")) if phase.needs_redis else ""
        )
        return await _timed_phase(args, name, phase, workdir, redis_url, secret_hex)


async def _timed_phase(
    args: argparse.Namespace,
    name: str,
    phase: TierPhase,
    workdir: Path,
    redis_url: str,
    secret_hex: str,
) -> dict[str, Any]:
    from load_tests.bench_prompts import QUESTION, chunk_token_ids, shuffled_prompts
    from load_tests.engine_setup import start_engine

    started = start_engine(
        args.model,
        Path(args.models_dir),
        workdir,
        max_model_len=args.chunks * args.chunk_tokens + 512,
        memory_bytes=phase.memory_bytes,
        shared_secret_hex=secret_hex,
        **phase.blend_overrides(redis_url),
    )
    engine, tokenizer, prefix = started.engine, started.tokenizer, started.prefix
    chunks = chunk_token_ids(tokenizer, args.chunks, args.chunk_tokens)
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    for index, chunk in enumerate(chunks):  # stored one by one: no long full prefill
        alone = shuffled_prompts(prefix, [chunk], question, 1, seed=99)[0]
        await time_to_first_token(engine, alone, "blend@0.15", f"warm-{index}")
    stored = await _written(phase, workdir, redis_url, bytes.fromhex(secret_hex), len(chunks))
    timed = [mode for mode in args.modes if phase.serves_from == "memory" or mode in phase.modes]
    timings: dict[str, list[float]] = {mode: [] for mode in timed}
    store: dict[str, int] = {}
    for index, prompt in enumerate(shuffled_prompts(prefix, chunks, question, args.requests, 1)):
        for mode in timings:
            salt = None if mode == "prefix" else f"{name}-{mode}-{index}"
            seconds, counters = await time_to_first_token(engine, prompt, mode, salt)
            timings[mode].append(seconds)
            store = counters or store
            print(f"  {name} {index} {mode}: {seconds:.3f}s", file=sys.stderr)
    engine.shutdown()
    return {"timings": timings, "stored": stored, "store": store}


async def _written(
    phase: TierPhase, workdir: Path, redis_url: str, secret: bytes, count: int
) -> dict[str, Any] | None:
    """`_stored_entries` once the slow tier holds ``count`` entries (its writes run in the
    background; a hit still in the write queue would be served from memory)."""
    deadline = time.monotonic() + WRITE_WAIT_S
    while True:
        await asyncio.to_thread(time.sleep, 2)
        stored = _stored_entries(phase, workdir, redis_url, secret)
        if stored is None or stored["entries"] >= count or time.monotonic() > deadline:
            return stored


def _stored_entries(
    phase: TierPhase, workdir: Path, redis_url: str, secret: bytes
) -> dict[str, Any] | None:
    """Bytes per token of the tier the phase serves from (None for the memory tier)."""
    if phase.serves_from == "disk":
        return measure_disk(workdir / "store", secret).to_dict()
    if phase.serves_from == "redis":
        return measure_redis(redis_url, secret).to_dict()
    return None


def mode_summary(timings: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Per mode: its median and fastest TTFT, the speed-up of the median over ``full`` (None
    when ``full`` was not timed), and the samples."""
    full = statistics.median(timings["full"]) if "full" in timings else None
    rows = []
    for mode, values in timings.items():
        median = statistics.median(values)
        rows.append(
            {
                "mode": mode,
                "median_ttft_s": round(median, 4),
                "fastest_ttft_s": round(min(values), 4),
                "speedup_vs_full": None if full is None else round(full / median, 2),
                "samples": [round(value, 4) for value in values],
            }
        )
    return rows


def phase_rows(results: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """Every phase's `mode_summary`, each row with its phase and its ratio to the memory tier."""
    from load_tests.bench_tiers import with_memory_ratios

    rows = [
        {"phase": phase, **row}
        for phase, timings in results.items()
        for row in mode_summary(timings)
    ]
    return with_memory_ratios(rows)


def parse_phases(text: str) -> list[str]:
    """``memory,redis`` -> the phases in the given order; unknown names are an error."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PHASES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"phases are some of {', '.join(PHASES)}; got {text!r}")
    return names


def parse_modes(text: str) -> list[str]:
    """``full,reuse`` -> the modes timed (in each phase that runs them); without ``full`` (slow
    on long prompts) the rows have no speed-up, only their ratio to the memory tier."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        ratios = [mode_spec(name).ratio for name in names]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"a mode is prefix or a mode spec: {exc}") from None
    if not names or not all(0 <= ratio <= 1 for ratio in ratios):
        raise argparse.ArgumentTypeError(
            f"modes are some of {', '.join(MODES)} or other specs (ratios 0 to 1)"
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=512)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--phases", type=parse_phases, default=list(PHASES))
    parser.add_argument("--modes", type=parse_modes, default=list(MODES), help="a subset")
    parser.add_argument("--out", default=scratch("blend_ttft"), help="<out>.json, <out>.png")
    add_part_arguments(parser, "phase", list(PHASES))
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.phase:
        write_part(args.phase_output, lambda workdir: _phase(args, args.phase, workdir))
        return 0
    results = {phase: run_part("load_tests.bench_blend", "phase", phase) for phase in args.phases}
    rows = phase_rows({phase: result["timings"] for phase, result in results.items()})
    from load_tests.bench_plot import plot_ttft, print_table

    print_table(rows)
    stored = {phase: result["stored"] for phase, result in results.items() if result["stored"]}
    for phase, entries in stored.items():
        print(f"{phase}: {entries['entries']} entries, {entries['bytes_per_token']} bytes/token")
    out = Path(args.out)
    hidden = {"phase", "phase_output"}
    settings = {key: value for key, value in vars(args).items() if key not in hidden}
    document = {
        "settings": settings,
        "rows": rows,
        "stored": stored,
        "store": {phase: result["store"] for phase, result in results.items()},
    }
    write_json(output_path(out, ".json"), document)
    plot_ttft(
        rows, output_path(out, ".png"), title=f"{args.model}, {args.chunks}x{args.chunk_tokens}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
