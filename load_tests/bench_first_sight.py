"""What a first sighting costs beside a full prefill of a prompt as long, in one engine.

Each round sends four requests of ``--chunks`` chunks of ``--chunk-tokens`` tokens behind the
fixed prefix, with a question: a full prefill (chunks never seen), a first sighting in blend mode
(other chunks never seen: the engine stores them as it computes them), those chunks again in the
reverse order (every chunk a hit, the server's cold recipe) and a partial hit (every other chunk
known, the rest never seen, a known one first). Medians over the rounds after the first
(warm-up), and each median over full's:

    python -m load_tests.bench_first_sight --chunks 6 --chunk-tokens 120 --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from load_tests.report import output_path, parse_rounds, scratch, write_json

ROWS = ("full", "first sight", "again, reversed", "half new")


async def _first_token_s(engine: Any, prompt: Any, mode: str, request_id: str) -> tuple[float, Any]:
    """Seconds to the first token of ``prompt`` blended as ``mode``, and the worker's stats."""
    from vllm import SamplingParams

    from engine.contract import BlendPlan, Recipe
    from load_tests.bench_blend import mode_spec

    plan = BlendPlan(mode_spec(mode).recipe(Recipe()), prompt.spans)
    reported: list[Any] = []
    params = SamplingParams(max_tokens=1, temperature=0)
    started = time.perf_counter()
    async for _ in engine.generate(
        request_id, prompt.token_ids, params, plan, reported.append, cache_salt=request_id
    ):
        return time.perf_counter() - started, reported[-1] if reported else None
    raise RuntimeError("the engine finished no output")


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from load_tests.bench_prompts import QUESTION, assemble, chunk_token_ids
    from load_tests.engine_setup import start_engine

    max_model_len = args.chunks * args.chunk_tokens + 512
    setup = start_engine(args.model, Path(args.models_dir), Path(tempfile.mkdtemp()), max_model_len)
    engine, tokenizer, prefix = setup.engine, setup.tokenizer, setup.prefix
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    timings: dict[str, list[float]] = {row: [] for row in ROWS}
    for index in range(args.rounds):
        full, seen, new = (
            chunk_token_ids(tokenizer, args.chunks, args.chunk_tokens, 10_000 + 3 * index + part)
            for part in range(3)
        )
        half_new = [chunk for pair in zip(seen, new, strict=True) for chunk in pair]
        prompts = {
            "full": assemble(prefix, full, question),
            "first sight": assemble(prefix, seen, question),
            "again, reversed": assemble(prefix, seen[::-1], question),
            "half new": assemble(prefix, half_new[: args.chunks], question),
        }
        for row, prompt in prompts.items():
            mode = "full" if row == "full" else args.mode
            seconds, stats = await _first_token_s(engine, prompt, mode, f"{row}-{index}")
            timings[row].append(seconds)
            hits = None if stats is None else (stats.chunks_hit, stats.chunks_missed)
            print(f"  {index} {row}: {seconds:.3f} s, chunks hit/missed {hits}", file=sys.stderr)
    engine.shutdown()
    medians = {row: statistics.median(values[1:]) for row, values in timings.items()}
    return {
        "args": vars(args),
        "prompt_tokens": len(prompts["full"].token_ids),
        "timings": timings,
        "median_s": medians,
        "over_full": {row: medians[row] / medians["full"] for row in ROWS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=120)
    parser.add_argument("--mode", default="blend@0.55/metric=probe", help="the cold recipe")
    parser.add_argument("--out", default=scratch("first_sight"), help="<out>.json")
    args = parse_rounds(parser)
    result = asyncio.run(_run(args))
    path = output_path(args.out, ".json")
    write_json(path, result)
    for row in ROWS:
        print(f"{row:16} {result['median_s'][row]:7.3f} s  {result['over_full'][row]:.2f}x full")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
