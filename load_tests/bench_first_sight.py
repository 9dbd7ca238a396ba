"""What a first sighting costs beside a full prefill of a prompt as long, in one engine.

Each round sends four requests of ``--chunks`` chunks of ``--chunk-tokens`` tokens behind the
fixed prefix, with a question: a full prefill (chunks never seen), a first sighting in blend mode
(other chunks never seen: the engine stores them as it computes them), those chunks again in the
reverse order (every chunk a hit, the server's cold recipe) and a partial hit (every other chunk
known, the rest never seen, a known one first). Each decodes ``--max-tokens`` tokens after its
first (EOS ignored), so that decoding after a blend is timed beside decoding after a full
prefill in the same engine. Medians over the rounds after the first (warm-up), and each median
over full's:

    python -m load_tests.bench_first_sight --chunks 6 --chunk-tokens 120 --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from load_tests.report import output_path, parse_rounds, scratch, write_json

ROWS = ("full", "first sight", "again, reversed", "half new")


@dataclass(frozen=True)
class Timing:
    first_token_s: float
    per_token_s: float | None
    """Seconds a token after the first (None when only one was asked for)."""
    stats: Any
    """The worker's blend statistics (None for a full prefill)."""


async def _timed(engine: Any, prompt: Any, mode: str, request_id: str, max_tokens: int) -> Timing:
    """``prompt`` blended as ``mode``, greedy, ``max_tokens`` tokens: when they came."""
    from vllm import SamplingParams

    from engine.contract import BlendPlan, Recipe
    from load_tests.bench_blend import mode_spec

    plan = BlendPlan(mode_spec(mode).recipe(Recipe()), prompt.spans)
    reported: list[Any] = []
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)
    started = time.perf_counter()
    first = last = None
    async for output in engine.generate(
        request_id, prompt.token_ids, params, plan, reported.append, cache_salt=request_id
    ):
        last = time.perf_counter()
        first = first or last
        tokens = len(output.outputs[0].token_ids)
    if first is None or last is None:
        raise RuntimeError("the engine finished no output")
    per_token = (last - first) / (tokens - 1) if tokens > 1 else None
    return Timing(first - started, per_token, reported[-1] if reported else None)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from load_tests.bench_prompts import QUESTION, assemble, chunk_token_ids
    from load_tests.engine_setup import start_engine

    max_model_len = args.chunks * args.chunk_tokens + 512
    setup = start_engine(args.model, Path(args.models_dir), Path(tempfile.mkdtemp()), max_model_len)
    engine, tokenizer, prefix = setup.engine, setup.tokenizer, setup.prefix
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    timings: dict[str, list[Timing]] = {row: [] for row in ROWS}
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
            timing = await _timed(engine, prompt, mode, f"{row}-{index}", args.max_tokens)
            timings[row].append(timing)
            stats = timing.stats
            hits = None if stats is None else (stats.chunks_hit, stats.chunks_missed)
            print(f"  {index} {row}: {timing.first_token_s:.3f} s, then {timing.per_token_s} "
                  f"s a token, chunks hit/missed {hits}", file=sys.stderr)  # fmt: skip
    engine.shutdown()
    first = {row: [timing.first_token_s for timing in rounds] for row, rounds in timings.items()}
    per_token = {row: [timing.per_token_s for timing in rounds] for row, rounds in timings.items()}
    return {
        "args": vars(args),
        "prompt_tokens": len(prompts["full"].token_ids),
        "first_token": _summary(first),
        "per_token": _summary(per_token) if args.max_tokens > 1 else None,
    }


def _summary(seconds: dict[str, list[Any]]) -> dict[str, Any]:
    """Per row: the seconds of every round, their median after the warm-up, over full's."""
    medians = {row: statistics.median(values[1:]) for row, values in seconds.items()}
    over_full = {row: median / medians["full"] for row, median in medians.items()}
    return {"seconds": seconds, "median_s": medians, "over_full": over_full}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=120)
    parser.add_argument("--mode", default="blend@0.55/metric=probe", help="the cold recipe")
    parser.add_argument("--max-tokens", type=int, default=32, help="decoded per request")
    parser.add_argument("--out", default=scratch("first_sight"), help="<out>.json")
    args = parse_rounds(parser)
    result = asyncio.run(_run(args))
    path = output_path(args.out, ".json")
    write_json(path, result)
    first, per_token = result["first_token"], result["per_token"]
    for row in ROWS:
        line = f"{row:16} TTFT {first['median_s'][row]:7.3f} s {first['over_full'][row]:.2f}x full"
        if per_token is not None:
            seconds, ratio = per_token["median_s"][row], per_token["over_full"][row]
            line += f", TPOT {seconds * 1000:6.1f} ms {ratio:.2f}x full"
        print(line)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
