"""What leaving a core to vLLM's scheduler does to decoding and prefill on CPU, in one run.

vLLM's scheduler waits for each step by spinning on a core. ``vllm serve`` keeps one core free
of the model's compute threads for it; with a KV connector attached vLLM asks for one more, which
on 2 cores it cannot give, so it then reserves none (``RAGBLEND_CPU_RESERVED_CORES``). This starts
one engine (with ragblend's connector) per reserved-core count and sends each, alternating, a
decode of ``--decode-tokens`` tokens and a prefill of ``--prompt-tokens`` tokens; medians over
the rounds after the first (warm-up):

    python -m load_tests.bench_cpu_reserve --reserved 0 1 --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from load_tests.report import output_path, parse_rounds, scratch, write_json

STORY = "The keeper lit the lamp at dusk and watched the ships pass the rocks. "


async def _timed(engine: Any, ids: list[int], request_id: str, tokens: int) -> tuple[float, float]:
    """Seconds to the first token and per later token of one greedy request."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True)
    started, arrivals = time.perf_counter(), []
    async for _ in engine.generate(request_id, ids, params):
        arrivals.append(time.perf_counter())
    per_token = (arrivals[-1] - arrivals[0]) / max(1, len(arrivals) - 1)
    return arrivals[0] - started, per_token


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from load_tests.engine_setup import start_engine

    engines = {}
    for reserved in args.reserved:
        os.environ.pop("VLLM_CPU_NUM_OF_RESERVED_CPU", None)  # each engine its own count
        workdir = Path(tempfile.mkdtemp())
        engines[reserved] = start_engine(
            args.model, Path(args.models_dir), workdir, 4096, cpu_reserved_cores=reserved
        )
    tokenizer = next(iter(engines.values())).tokenizer
    timings: dict[int, dict[str, list[float]]] = {
        reserved: {"decode_s_per_token": [], "prefill_ttft_s": []} for reserved in engines
    }
    for index in range(args.rounds):
        order = list(engines.items())
        for reserved, setup in order if index % 2 == 0 else order[::-1]:
            opening = tokenizer.encode(f"Story {index}: once upon a time a lighthouse keeper")
            decode = args.decode_tokens
            _, per_token = await _timed(setup.engine, opening, f"d{reserved}-{index}", decode)
            long = tokenizer.encode(f"Log {index}. " + STORY * 200)[: args.prompt_tokens]
            ttft, _ = await _timed(setup.engine, long, f"p{reserved}-{index}", 1)
            timings[reserved]["decode_s_per_token"].append(per_token)
            timings[reserved]["prefill_ttft_s"].append(ttft)
            print(f"  {index} reserved {reserved}: {per_token:.4f} s/token, prefill {ttft:.3f} s",
                  file=sys.stderr)  # fmt: skip
    for setup in engines.values():
        setup.engine.shutdown()
    medians = {
        reserved: {name: statistics.median(values[1:]) for name, values in rows.items()}
        for reserved, rows in timings.items()
    }
    return {"args": vars(args), "timings": timings, "median": medians}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--reserved", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--out", default=scratch("cpu_reserve"), help="<out>.json")
    args = parse_rounds(parser)
    result = asyncio.run(_run(args))
    path = output_path(args.out, ".json")
    write_json(path, result)
    for reserved, row in result["median"].items():
        print(f"reserved {reserved}: decode {row['decode_s_per_token']:.4f} s/token, "
              f"prefill of {args.prompt_tokens} tokens {row['prefill_ttft_s']:.3f} s")  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
