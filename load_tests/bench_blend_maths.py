"""The blend maths against a full prefill off the engine: on a CUDA GPU, where vLLM's CUDA build
cannot be installed in this project's sandboxes, or on the CPU.

A Hugging Face Qwen2 with a served model's geometry (random weights: the speed does not depend
on them) prefills one prompt (a fixed prefix, ``--chunks`` cached chunks, a question) in every
way side by side: Hugging Face's own forward (the baseline), the blend maths computing every
token (ratio 1), and each ``--modes`` recipe reusing the chunks' KV. Each chunk's KV is computed
behind the prefix first and kept in host memory, as the memory tier hands it over (``--kv-on
device`` keeps it on the GPU). Medians of ``--repeats`` timed runs after a warm-up, and their
ratios to the baseline. This times the maths alone: no scheduler, paged cache or HTTP.

    python -m load_tests.bench_blend_maths --device cuda --context 8192 --modes probe@0.15,v@0.15
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
from load_tests.hf_decoder import HFAdapter, hf_rope_spec
from load_tests.report import format_grid, output_path, scratch, write_json

GEOMETRIES = {  # Qwen2.5 0.5B and 1.5B: hidden, heads, KV heads, layers, MLP width
    "0.5b": (896, 14, 2, 24, 4864),
    "1.5b": (1536, 12, 2, 28, 8960),
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
    return Qwen2ForCausalLM(config).eval().to(device, dtype)


def parse_mode(text: str) -> Recipe:
    """``metric@ratio`` (``probe@0.15``) as the served default recipe with those two changed."""
    metric, _, ratio = text.partition("@")
    return replace(Recipe(), metric=metric, recompute_ratio=float(ratio))  # type: ignore[arg-type]


def chunk_layers(
    adapter: HFAdapter, prefix: Tensor, chunks: list[Tensor], host: bool
) -> list[list[tuple[Tensor, Tensor]]]:
    """Each chunk's per-layer KV computed behind ``prefix``, in host memory when ``host``."""
    layers: list[list[tuple[Tensor, Tensor]]] = [[] for _ in chunks]

    def keep(chunk: int, _layer: int, keys: Tensor, values: Tensor) -> None:
        kv = (keys.clone(), values.clone())
        if host and keys.is_cuda:
            kv = (kv[0].cpu().pin_memory(), kv[1].cpu().pin_memory())
        layers[chunk].append(kv)

    prefill_behind(adapter, compute_prefix(adapter, prefix), chunks, keep)
    return layers


def timed(run: Callable[[], Any], device: torch.device, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` runs after one untimed warm-up."""
    times = []
    for index in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if index:
            times.append((time.perf_counter() - began) * 1000)
    return times


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES), default="0.5b")
    parser.add_argument("--context", type=int, default=8192, help="prompt tokens, about")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--modes", default="probe@0.15,v@0.15")
    parser.add_argument("--kv-on", choices=["host", "device"], default="host")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=scratch("blend_maths"), help="<out>.json")
    return parser


def main() -> None:
    args = build_parser().parse_args()

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    model = random_model(args.geometry, device, dtype)
    adapter, rope = HFAdapter(model), hf_rope_spec(model)
    chunk_tokens = (args.context - PREFIX_TOKENS - QUESTION_TOKENS) // args.chunks
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(100, VOCAB, (PREFIX_TOKENS + args.chunks * chunk_tokens + QUESTION_TOKENS,),
                        generator=generator).to(device)  # fmt: skip
    starts = [PREFIX_TOKENS + index * chunk_tokens for index in range(args.chunks)]
    chunks = [ids[start : start + chunk_tokens] for start in starts]
    stored = chunk_layers(adapter, ids[:PREFIX_TOKENS], chunks, host=args.kv_on == "host")

    def blend(recipe: Recipe, cached: bool) -> Callable[[], Any]:
        def run() -> None:
            placed = [
                CachedChunk(start, start + chunk_tokens, PREFIX_TOKENS, iter(layers))
                for start, layers in zip(starts, stored, strict=True)
            ]
            chunks = PlacedChunks(placed if cached else [], rope, ids.numel(), device)
            blend_prefill(adapter, Prompt(ids), chunks, recipe, LayerHooks(lambda *_: None))

        return run

    with torch.inference_mode():
        ways = {"HF forward (full prefill)": lambda: model.model(ids[None], use_cache=False)}
        ways["blend maths, every token"] = blend(Recipe.exact(), cached=False)
        for mode in args.modes.split(","):
            ways[f"blend {mode}"] = blend(parse_mode(mode), cached=True)
        runs = {name: timed(run, device, args.repeats) for name, run in ways.items()}

    baseline = statistics.median(runs["HF forward (full prefill)"])
    results = {
        name: {"median_ms": statistics.median(times), "runs_ms": times,
               "speedup": baseline / statistics.median(times)}
        for name, times in runs.items()
    }  # fmt: skip
    rows = [
        (name, f"{result['median_ms']:.1f} ms", f"{result['speedup']:.2f}x")
        for name, result in results.items()
    ]
    print(f"{args.geometry} geometry, {ids.numel()} tokens, {args.device} {args.dtype}, "
          f"chunk KV on {args.kv_on}")  # fmt: skip
    print(format_grid(("prefill", "median", "speed-up"), rows))
    settings = {**vars(args), "tokens": ids.numel(), "chunk_tokens": chunk_tokens}
    if device.type == "cuda":
        settings["gpu"] = torch.cuda.get_device_name(device)
    write_json(output_path(Path(args.out), ".json"), {"settings": settings, "results": results})


if __name__ == "__main__":
    main()
