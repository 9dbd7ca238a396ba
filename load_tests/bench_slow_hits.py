"""TTFT of chunk hits from disk or Redis beside memory hits of the same chunks, in one engine.

`bench_blend` times each tier in its own engine, one after another. On a shared machine the
same work can run a third slower a minute later, and an engine's first requests run slower
than its later ones, so those rows compare moments as much as tiers. Here one engine per slow
tier serves two sets of chunks in turn, with a memory tier that holds exactly one set:

- a request on the set not used last finds its chunks only in the slow tier (they are promoted
  into memory as they load, evicting the other set);
- the next request, the same set in a new order, finds every chunk in memory.

Each pair, a slow hit and then a memory hit seconds later, gives one ratio. The store's counters
confirm where each request's chunks came from; a request served otherwise stops the run.
Chunks are always loaded (`recompute_when_faster` off), so the slow rows time the load path.
``--recompute-when-faster`` turns the served default on instead: the store then computes a slow
hit again when its meter says that is faster, and the rows count the chunks it did so for.

    python -m load_tests.bench_slow_hits [--model qwen2.5-coder-0.5b-instruct]
        [--tiers disk,redis] [--format lossless] [--chunks 16] [--chunk-tokens 512]
        [--pairs 8] [--warmup-pairs 1] [--mode blend@0.15] [--recompute-when-faster]
        [--out <stem>]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from load_tests.bench_parts import add_part_arguments, run_part, write_part
from load_tests.report import output_path, scratch, write_json

TIERS = ("disk", "redis")
TOO_SMALL_FOR_A_CHUNK = 1 << 20


def memory_tier_bytes(chunks: int, chunk_bytes: int) -> int:
    """A memory tier that holds ``chunks`` entries of ``chunk_bytes`` and not one more."""
    return chunks * chunk_bytes + chunk_bytes // 2


def raw_chunk_bytes(model_dir: Path, tokens: int, itemsize: int) -> int:
    """Bytes of one chunk's K and V in memory, from the model's config."""
    config = json.loads((model_dir / "config.json").read_text())
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads", heads)
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * itemsize * tokens


def hit_sources(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Hits per tier between two snapshots of the store's counters (tiers with none left out)."""
    sources = {}
    for name, count in after.items():
        if name.endswith("_hits") and name != "pending_hits":
            gained = count - before.get(name, 0)
            if gained:
                sources[name.removesuffix("_hits")] = gained
    return sources


def pair_summary(slow: list[float], memory: list[float]) -> dict[str, Any]:
    """A tier's row from paired TTFTs (slow hit, then memory hit): the median of the per-pair
    ratios, the ratio of the medians and of the fastest, and every sample."""
    if not slow or len(slow) != len(memory):
        raise ValueError(f"pairs need equal, non-empty samples; got {len(slow)}, {len(memory)}")
    ratios = [s / m for s, m in zip(slow, memory, strict=True)]
    return {
        "median_pair_ratio": round(statistics.median(ratios), 3),
        "ratio_of_medians": round(statistics.median(slow) / statistics.median(memory), 3),
        "ratio_of_fastest": round(min(slow) / min(memory), 3),
        "slow_median_s": round(statistics.median(slow), 3),
        "memory_median_s": round(statistics.median(memory), 3),
        "pair_ratios": [round(ratio, 3) for ratio in ratios],
        "slow_samples": [round(value, 3) for value in slow],
        "memory_samples": [round(value, 3) for value in memory],
    }


async def _timed_tier(args: argparse.Namespace, tier: str, workdir: Path) -> dict[str, Any]:
    with ExitStack() as stack:
        redis_url = ""
        if tier == "redis":
            from load_tests.redis_launcher import running_redis

            redis_url = stack.enter_context(running_redis(workdir / "redis"))
        return await _pairs(args, tier, workdir, redis_url)


async def _pairs(
    args: argparse.Namespace, tier: str, workdir: Path, redis_url: str
) -> dict[str, Any]:
    import secrets

    from engine.models.provision import resolve_model
    from engine.platform import resolve_device, resolve_dtype
    from load_tests.bench_blend import time_to_first_token
    from load_tests.bench_prompts import QUESTION, chunk_token_ids, shuffled_prompts
    from load_tests.engine_setup import start_engine

    model_dir = resolve_model(args.model, Path(args.models_dir))
    itemsize = 2 if resolve_dtype("auto", resolve_device("auto")) != "float32" else 4
    chunk_bytes = raw_chunk_bytes(model_dir, args.chunk_tokens, itemsize)
    started = start_engine(
        args.model,
        Path(args.models_dir),
        workdir,
        max_model_len=args.chunks * args.chunk_tokens + 512,
        memory_bytes=memory_tier_bytes(args.chunks, chunk_bytes),
        disk_bytes=TOO_SMALL_FOR_A_CHUNK if tier == "redis" else None,
        shared_secret_hex=secrets.token_hex(32),
        redis_url=redis_url,
        slow_tier_format=args.format,
        recompute_when_faster=args.recompute_when_faster,
    )
    engine, tokenizer, prefix = started.engine, started.tokenizer, started.prefix
    question = tokenizer.encode(QUESTION, add_special_tokens=False)
    sets = [
        chunk_token_ids(tokenizer, args.chunks, args.chunk_tokens, seed=seed) for seed in (0, 1)
    ]
    counters: dict[str, int] = {}
    for set_index, chunks in enumerate(sets):  # stored one by one: no long full prefill
        for index, chunk in enumerate(chunks):
            alone = shuffled_prompts(prefix, [chunk], question, 1, seed=99)[0]
            salt = f"store-{set_index}-{index}"
            _, counters = await time_to_first_token(engine, alone, args.mode, salt)
    await asyncio.sleep(args.write_wait)  # the slow tier's writes run in the background
    timings: dict[str, list[float]] = {tier: [], "memory": []}
    recomputed: dict[str, list[int]] = {tier: [], "memory": []}
    for pair in range(args.warmup_pairs + args.pairs):
        chunks = sets[pair % 2]  # the set stored or used last is in memory: start with the other
        prompts = shuffled_prompts(prefix, chunks, question, 2, seed=pair)
        for source, prompt in zip((tier, "memory"), prompts, strict=True):
            salt = f"{tier}-pair{pair}-{source}"
            seconds, after = await time_to_first_token(engine, prompt, args.mode, salt)
            found = hit_sources(counters, after)
            recomputed[source].append(
                after["recomputed_instead"] - counters.get("recomputed_instead", 0)
            )
            counters = after
            # every chunk is a hit or, with the meter on, computed again instead
            accounted = sum(found.values()) + recomputed[source][-1] == args.chunks
            if not accounted or (not args.recompute_when_faster and found != {source: args.chunks}):
                engine.shutdown()
                raise RuntimeError(f"pair {pair}: expected {args.chunks} {source} hits, {found}")
            print(
                f"  {tier} pair {pair} {source}: {seconds:.3f}s, hits {found}, "
                f"recomputed instead {recomputed[source][-1]}",
                file=sys.stderr,
            )
            if pair >= args.warmup_pairs:
                timings[source].append(seconds)
    engine.shutdown()
    return {"timings": timings, "recomputed_instead": recomputed, "store": counters}


def parse_tiers(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or set(names) - set(TIERS):
        raise argparse.ArgumentTypeError(f"tiers are some of {', '.join(TIERS)}; got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--tiers", type=parse_tiers, default=list(TIERS))
    parser.add_argument("--format", choices=("raw", "lossless", "int8"), default="lossless")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--chunk-tokens", type=int, default=512)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--warmup-pairs", type=int, default=1)
    parser.add_argument("--mode", default="blend@0.15", help="a mode spec, as in bench_blend")
    parser.add_argument(
        "--recompute-when-faster",
        action="store_true",
        help="the served default: a slow hit is computed again when the meter says that is faster",
    )
    parser.add_argument("--write-wait", type=float, default=5.0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=scratch("slow_hits"), help="<out>.json")
    add_part_arguments(parser, "tier", list(TIERS))
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.tier:
        write_part(args.tier_output, lambda workdir: _timed_tier(args, args.tier, workdir))
        return 0
    results = {tier: run_part("load_tests.bench_slow_hits", "tier", tier) for tier in args.tiers}
    rows = []
    for tier, result in results.items():
        timings = result["timings"]
        recomputed = result["recomputed_instead"]
        rows.append(
            {"tier": tier, **pair_summary(timings[tier], timings["memory"]),
             "recomputed_instead": recomputed}
        )  # fmt: skip
        row = rows[-1]
        print(
            f"{tier}: median pair ratio {row['median_pair_ratio']}x a memory hit "
            f"(medians {row['slow_median_s']} s / {row['memory_median_s']} s, "
            f"fastest {row['ratio_of_fastest']}x); chunks recomputed instead of loaded: "
            f"{sum(recomputed[tier])} on slow hits, {sum(recomputed['memory'])} on memory hits"
        )
    hidden = {"tier", "tier_output", "write_wait"}
    settings = {key: value for key, value in vars(args).items() if key not in hidden}
    document = {
        "settings": settings,
        "rows": rows,
        "store": {tier: result["store"] for tier, result in results.items()},
    }
    out = Path(args.out)
    write_json(output_path(out, ".json"), document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
