"""Where the time of a prefill goes: vLLM's torch profiler around full and blended requests.

The cost model of the blend (docs/benchmarks.md) has a part no timing explains: a recomputed token
costs more than a token of full prefill. This traces the engine core while it serves the same
shuffled-chunk prompts in each mode and sums the trace by module and function, so the two
prefills can be compared part by part, per computed token.

    python -m load_tests.profile_blend --context 3072 --chunks 6 \
        --modes full,blend@0.12/metric=probe
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from load_tests.bench_blend import first_token, parse_modes
from load_tests.bench_sweep import QUESTION_MARGIN_TOKENS
from load_tests.report import output_path, scratch

PROJECT_FUNCTION = re.compile(r"(?:^|/)(engine/[\w/]+\.py)\(\d+\): (\w+)")
STEP_FUNCTION = "gpu_model_runner.py(", "): execute_model"
MODULE_INDEX = re.compile(r"_\d+$")


def event_name(event: dict[str, Any]) -> str | None:
    """The name a trace event is summed under: an operator, a module class, one of this
    project's functions, or the engine step; None for the rest (waits, vLLM's plumbing)."""
    if event.get("ph") != "X" or "dur" not in event:
        return None
    name = str(event["name"])
    if event.get("cat") == "cpu_op":
        return name
    if name.startswith("nn.Module: "):
        return MODULE_INDEX.sub("", name)
    match = PROJECT_FUNCTION.search(name)
    if match:
        return f"{match.group(1)}:{match.group(2)}"
    if STEP_FUNCTION[0] in name and name.endswith(STEP_FUNCTION[1]):
        return "engine step (execute_model)"
    return None


def inclusive_totals(events: list[dict[str, Any]]) -> dict[str, float]:
    """Microseconds per name, each counted once where spans of one name nest (recursion)."""
    totals: dict[str, float] = defaultdict(float)
    open_until: dict[tuple[Any, str], float] = {}
    for event in sorted(events, key=lambda e: (str(e.get("tid")), float(e.get("ts", 0)))):
        name = event_name(event)
        if name is None:
            continue
        start, duration = float(event["ts"]), float(event["dur"])
        key = (event.get("tid"), name)
        if start < open_until.get(key, float("-inf")):
            continue
        open_until[key] = start + duration
        totals[name] += duration
    return dict(totals)


def read_trace(directory: Path, name: str) -> list[dict[str, Any]]:
    traces = sorted(directory.glob(f"{name}*.json"), key=lambda path: path.stat().st_mtime)
    if not traces:
        raise RuntimeError(f"the engine wrote no trace named {name}* under {directory}")
    print(f"traces: {[path.name for path in traces]}", file=sys.stderr)
    return json.loads(traces[-1].read_text())["traceEvents"]


async def _serve(engine: Any, prompt: Any, mode: str, salt: str) -> int:
    """Serve ``prompt`` to its first token; the tokens computed (the blend's recomputed ones)."""
    from engine.contract import BlendStats

    reported: list[BlendStats] = []
    async for output in first_token(engine, prompt, mode, salt, reported.append):
        if output.finished:
            return reported[-1].recomputed_tokens if reported else len(prompt.token_ids)
    raise RuntimeError("the engine finished no output")


async def _profile(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    from load_tests.bench_prompts import QUESTION, chunk_token_ids, shuffled_prompts
    from load_tests.engine_setup import start_engine

    traces = workdir / "traces"
    started = start_engine(
        args.model, Path(args.models_dir), workdir, args.context + QUESTION_MARGIN_TOKENS,
        profile_dir=traces,
    )  # fmt: skip
    engine, tokenizer = started.engine, started.tokenizer
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    chunks = chunk_token_ids(tokenizer, args.chunks, args.context // args.chunks)
    warm = shuffled_prompts(started.prefix, chunks, question, 1, seed=99)[0]
    prompts = shuffled_prompts(started.prefix, chunks, question, args.requests, seed=1)
    rows = []
    for index, mode in enumerate(args.modes):
        await _serve(engine, warm, mode, f"warm-{index}")
        name = f"mode{index}"
        await engine.start_profile(name)
        computed = [await _serve(engine, p, mode, f"{name}-{i}") for i, p in enumerate(prompts)]
        await engine.stop_profile()
        totals = inclusive_totals(read_trace(traces, name))
        print(f"{mode}: {sum(computed)} tokens computed, {len(prompts)} requests", file=sys.stderr)
        rows += [
            {
                "mode": mode,
                "name": part,
                "ms_per_request": round(micros / 1e3 / len(prompts), 2),
                "us_per_computed_token": round(micros / sum(computed), 2),
            }
            for part, micros in totals.items()
        ]
    engine.shutdown()
    return rows


def print_table(rows: list[dict[str, Any]], top: int) -> None:
    for mode in dict.fromkeys(row["mode"] for row in rows):
        print(f"\n{mode}: ms per request, us per computed token")
        ranked = sorted((r for r in rows if r["mode"] == mode), key=lambda r: -r["ms_per_request"])
        for row in ranked[:top]:
            per_request, per_token = row["ms_per_request"], row["us_per_computed_token"]
            print(f"  {per_request:10.1f} {per_token:10.1f}  {row['name']}")


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--context", type=int, default=3072, help="chunk tokens per prompt")
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--modes", type=parse_modes, default=["full", "blend@0.12/metric=probe"])
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--top", type=int, default=30, help="rows printed per mode")
    parser.add_argument("--out", default=scratch("profile_blend"), help="<out>.json")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    with tempfile.TemporaryDirectory(prefix="profile-blend-") as workdir:
        rows = asyncio.run(_profile(args, Path(workdir)))
    print_table(rows, args.top)
    out = output_path(args.out, ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
