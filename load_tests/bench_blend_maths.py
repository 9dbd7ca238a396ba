"""The blend maths against a full prefill off the engine: on a CUDA GPU, where vLLM's CUDA build
cannot be installed in this project's sandboxes, or on the CPU.

A Hugging Face Qwen2 with a served model's geometry (random weights: the speed does not depend
on them) prefills one prompt (a fixed prefix, ``--chunks`` cached chunks, a question) in every
way side by side: Hugging Face's own forward (the baseline), the blend maths computing every
token (ratio 1), and each ``--modes`` recipe reusing the chunks' KV. Each chunk's KV is computed
behind the prefix first and kept in pinned host memory, as the memory tier hands it over, and/or
on the GPU (``--kv-on host,device``: a row per source). Medians of ``--repeats`` rounds, each
way in turn, after a warm-up, and their ratios to the baseline; ``--profile`` adds what the GPU
did in one run of each (busy share, stream syncs, kernel launches: ``gpu_profile``). The
weights are random, made on the device in the model's dtype. This times the maths alone: no
scheduler, paged cache or HTTP, and nothing from vLLM (only torch and transformers are needed).

    python -m load_tests.bench_blend_maths --device cuda --geometry 7b --context 8192 \
        --modes probe@0.15,v@0.15 --kv-on host,device --profile
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import Qwen2Config, Qwen2ForCausalLM

from engine.blend.behind import compute_prefix, prefill_behind
from engine.blend.fuse import CachedChunk, LayerHooks, PlacedChunks, Prompt, blend_prefill
from engine.contract import Recipe
from load_tests.gpu_profile import profile_call
from load_tests.hf_decoder import HFAdapter, hf_rope_spec
from load_tests.report import format_grid, output_path, scratch, write_json

GEOMETRIES = {  # Qwen2.5: hidden, heads, KV heads, layers, MLP width
    "0.5b": (896, 14, 2, 24, 4864),
    "1.5b": (1536, 12, 2, 28, 8960),
    "7b": (3584, 28, 4, 28, 18944),
    "14b": (5120, 40, 8, 48, 13824),
}
PREFIX_TOKENS = QUESTION_TOKENS = 32
VOCAB = 151936


def random_model(geometry: str, device: torch.device, dtype: torch.dtype) -> Any:
    hidden, heads, kv_heads, layers, mlp = GEOMETRIES[geometry]
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=hidden, num_attention_heads=heads,
        num_key_value_heads=kv_heads, num_hidden_layers=layers, intermediate_size=mlp,
        rope_theta=1e6, max_position_embeddings=32768,
    )  # fmt: skip
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # made on the device in its dtype: no host fp32 copy of 14B
    try:
        with torch.device(device):
            return Qwen2ForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)


def parse_mode(text: str) -> Recipe:
    """``metric@ratio`` (``probe@0.15``) as the served default recipe with those two changed."""
    metric, _, ratio = text.partition("@")
    return replace(Recipe(), metric=metric, recompute_ratio=float(ratio))  # type: ignore[arg-type]


StoredKV = list[list[tuple[Tensor, Tensor]]]


def bench_prompt(context: int, chunks: int, device: torch.device) -> tuple[Tensor, list[int], int]:
    """About ``context`` random tokens on ``device``: a prefix, ``chunks`` chunks of one length
    and a question. Returns the ids, where each chunk starts and the chunks' length."""
    chunk_tokens = (context - PREFIX_TOKENS - QUESTION_TOKENS) // chunks
    total = PREFIX_TOKENS + chunks * chunk_tokens + QUESTION_TOKENS
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(100, VOCAB, (total,), generator=generator).to(device)
    starts = [PREFIX_TOKENS + index * chunk_tokens for index in range(chunks)]
    return ids, starts, chunk_tokens


def cached_chunks(stored: StoredKV, starts: list[int], chunk_tokens: int) -> list[CachedChunk]:
    """The chunks' ``stored`` KV placed where ``bench_prompt`` put them, read layer by layer."""
    return [
        CachedChunk(start, start + chunk_tokens, PREFIX_TOKENS, iter(layers))
        for start, layers in zip(starts, stored, strict=True)
    ]


def chunk_layers(adapter: HFAdapter, prefix: Tensor, chunks: list[Tensor]) -> StoredKV:
    """Each chunk's per-layer KV computed behind ``prefix``, on the model's device."""
    layers: StoredKV = [[] for _ in chunks]

    def keep(chunk: int, _layer: int, keys: Tensor, values: Tensor) -> None:
        layers[chunk].append((keys.clone(), values.clone()))

    prefill_behind(adapter, compute_prefix(adapter, prefix), chunks, keep)
    return layers


def on_host(stored: StoredKV) -> StoredKV:
    """The chunks' KV in host memory, pinned where a GPU can copy from it."""

    def moved(tensor: Tensor) -> Tensor:
        return tensor.cpu().pin_memory() if torch.cuda.is_available() else tensor.cpu()

    return [[(moved(keys), moved(values)) for keys, values in layers] for layers in stored]


def timed(
    ways: dict[Any, Callable[[], Any]], device: torch.device, repeats: int
) -> dict[Any, list[float]]:
    """Milliseconds of ``repeats`` runs of each way after one untimed warm-up of each, the ways
    taken in turn within each round, so that a machine slowing down or speeding up mid-run
    moves them all alike."""
    times: dict[Any, list[float]] = {way: [] for way in ways}
    for round_ in range(repeats + 1):
        for way, run in ways.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if round_:
                times[way].append((time.perf_counter() - began) * 1000)
    return times


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES), default="0.5b")
    parser.add_argument("--context", type=int, default=8192, help="prompt tokens, about")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--modes", default="probe@0.15,v@0.15")
    parser.add_argument(
        "--kv-on", default=None, help="chunk KV sources, a row each: host, device or host,device "
        "(default: both on a GPU, host on the CPU)"
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="trace one run of each way")
    parser.add_argument("--out", default=scratch("blend_maths"), help="<out>.json")
    return parser


def main() -> None:
    args = build_parser().parse_args()

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sources = (args.kv_on or ("host,device" if device.type == "cuda" else "host")).split(",")
    if not set(sources) <= {"host", "device"}:
        raise SystemExit(f"--kv-on takes host and/or device, got {args.kv_on!r}")
    if args.profile and device.type != "cuda":
        raise SystemExit("--profile traces a CUDA GPU")
    model = random_model(args.geometry, device, dtype)
    adapter, rope = HFAdapter(model), hf_rope_spec(model)
    ids, starts, chunk_tokens = bench_prompt(args.context, args.chunks, device)
    chunks = [ids[start : start + chunk_tokens] for start in starts]
    on_device = chunk_layers(adapter, ids[:PREFIX_TOKENS], chunks)
    stored = {"device": on_device} if "device" in sources else {}
    if "host" in sources:
        stored["host"] = on_host(on_device)
    if "device" not in sources:
        del on_device

    def blend(recipe: Recipe, source: str | None) -> Callable[[], Any]:
        def run() -> None:
            placed = cached_chunks(stored[source], starts, chunk_tokens) if source else []
            cached = PlacedChunks(placed, rope, ids.numel(), device)
            blend_prefill(adapter, Prompt(ids), cached, recipe, LayerHooks(lambda *_: None))

        return run

    with torch.inference_mode():
        ways = {("HF forward (full prefill)", "-"): lambda: model.model(ids[None], use_cache=False)}
        ways["blend maths, every token", "-"] = blend(Recipe.exact(), None)
        for mode in args.modes.split(","):
            for source in sources:
                ways[f"blend {mode}", source] = blend(parse_mode(mode), source)
        runs = timed(ways, device, args.repeats)
        profiles = {way: profile_call(run) for way, run in ways.items()} if args.profile else {}

    baseline = statistics.median(runs["HF forward (full prefill)", "-"])
    results = {
        f"{name} [{source} KV]" if source != "-" else name: {
            "chunk_kv": source, "median_ms": statistics.median(times), "runs_ms": times,
            "speedup": baseline / statistics.median(times), **profiles.get((name, source), {}),
        }
        for (name, source), times in runs.items()
    }  # fmt: skip
    rows = []
    for (name, source), times in runs.items():
        median = statistics.median(times)
        cells = (name, source, f"{median:.1f} ms", f"{baseline / median:.2f}x")
        rows.append(cells + _profile_cells(profiles.get((name, source))))
    print(f"{args.geometry} geometry, {ids.numel()} tokens, {args.device} {args.dtype}")
    header = ("prefill", "chunk KV", "median", "speed-up")
    if profiles:
        header += ("GPU busy", "syncs", "launches")
    print(format_grid(header, rows))
    settings = {**vars(args), "tokens": ids.numel(), "chunk_tokens": chunk_tokens}
    if device.type == "cuda":
        settings["gpu"] = torch.cuda.get_device_name(device)
    write_json(output_path(Path(args.out), ".json"), {"settings": settings, "results": results})


def _profile_cells(profile: dict[str, float] | None) -> tuple[str, ...]:
    if profile is None:
        return ()
    return (f"{profile['gpu_busy_share']:.0%}", str(profile["stream_syncs"]),
            str(profile["kernel_launches"]))  # fmt: skip


if __name__ == "__main__":
    main()
