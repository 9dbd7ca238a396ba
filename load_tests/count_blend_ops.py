"""How many torch operations one blend dispatches, and whose: the model's layer halves or the
blend maths around them. On a GPU nearly every one is a kernel launch or a copy, and a small
model's blend is bound by those (issue 41), so this counts them where no GPU is at hand.

The same random-weight Qwen2 geometries and prompt as ``bench_blend_maths``, one blend per
``--chunks`` count, so that a cost growing with the chunk count shows. Views and host-side
reads are not counted (no kernel runs for them).

    python -m load_tests.count_blend_ops --geometry 0.5b --context 2048 --chunks 4,16
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.blend.fuse import LayerHooks, PlacedChunks, Prompt, blend_prefill
from engine.contract import Recipe
from load_tests.bench_blend_maths import (
    GEOMETRIES,
    PREFIX_TOKENS,
    bench_prompt,
    cached_chunks,
    chunk_layers,
    on_host,
    parse_mode,
    random_model,
)
from load_tests.hf_decoder import HFAdapter, hf_rope_spec
from load_tests.report import format_grid

NO_KERNEL = frozenset({
    "_reshape_alias", "_unsafe_view", "alias", "as_strided", "chunk", "detach", "expand",
    "flatten", "is_nonzero", "item", "lift_fresh", "permute", "reshape", "select", "slice",
    "split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unsqueeze", "view",
})  # fmt: skip
"""Operations that only make a view or read a value on the host."""
MODEL_HALVES = ("embed", "qkv", "finish")


class OpCounter(TorchDispatchMode):
    """Counts the dispatched operations that run a kernel, under the label ``part`` names."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.part = "blend maths"

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL and (name != "to" or result is not args[0]):
            self.counts[self.part] += 1  # a ``to`` that hands its input back moved nothing
        return result


def labelled(counter: OpCounter, part: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, its operations counted as ``part``."""

    def run(*args: Any) -> Any:
        outer, counter.part = counter.part, part
        try:
            return call(*args)
        finally:
            counter.part = outer

    return run


def count_one_blend(args: argparse.Namespace, chunks: int) -> Counter[str]:
    device = torch.device(args.device)
    model = random_model(args.geometry, device, getattr(torch, args.dtype))
    adapter, rope = HFAdapter(model), hf_rope_spec(model)
    ids, starts, chunk_tokens = bench_prompt(args.context, chunks, device)
    pieces = [ids[start : start + chunk_tokens] for start in starts]
    stored = on_host(chunk_layers(adapter, ids[:PREFIX_TOKENS], pieces))
    counter = OpCounter()
    for half in MODEL_HALVES:
        setattr(adapter, half, labelled(counter, f"model {half}", getattr(adapter, half)))
    recipe: Recipe = parse_mode(args.mode)
    placed = cached_chunks(stored, starts, chunk_tokens)
    with torch.inference_mode(), counter:
        cached = PlacedChunks(placed, rope, ids.numel(), device)
        blend_prefill(adapter, Prompt(ids), cached, recipe, LayerHooks(lambda *_: None))
    return counter.counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="float32")
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES), default="0.5b")
    parser.add_argument("--context", type=int, default=2048, help="prompt tokens, about")
    parser.add_argument("--chunks", default="4,16", help="chunk counts, a blend each")
    parser.add_argument("--mode", default="probe@0.15", help="metric@ratio")
    args = parser.parse_args()
    layers = GEOMETRIES[args.geometry][3]
    parts = ["blend maths", *(f"model {half}" for half in MODEL_HALVES)]
    rows = []
    for chunks in (int(count) for count in args.chunks.split(",")):
        counts = count_one_blend(args, chunks)
        cells = [f"{counts[part]} ({counts[part] / layers:.1f})" for part in parts]
        rows.append((str(chunks), *cells, str(sum(counts.values()))))
    print(f"{args.geometry} geometry ({layers} layers), {args.context} tokens, {args.mode}, "
          f"{args.device}: operations a blend (a layer)")  # fmt: skip
    print(format_grid(("chunks", *parts, "total"), rows))


if __name__ == "__main__":
    main()
