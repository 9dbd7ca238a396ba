"""Answer quality and TTFT of full / reuse / blend on multi-chunk prompts, in one in-process engine.

    python -m load_tests.eval.quality --model qwen2.5-coder-0.5b-instruct --items 40
    python -m load_tests.eval.quality --dataset xsum --items 40 --out docs/bench/quality_xsum

QA items are a gold passage plus distractor passages from other items, shuffled; XSum items are
one article cut into chunks in order (``load_tests/eval/tasks.py`` has each dataset's prompt,
decoding and scores). Every document is one chunk, stored before the item's first mode is timed.
QA prompts are a chat turn (the chunks, then the question; see ``qa_prompt.py``), XSum prompts
plain text (prefix, chunks, the summary instruction); decoded greedily up to a newline. Reports
the mean score (F1, or Rouge-L for XSum) with a 95% interval, its gap to full prefill with a 95%
interval paired per item, agreement with full prefill's answer, the mean share of chunk tokens
recomputed (what the worker reported: 1 - reused / chunk tokens) and median TTFT per mode, as a
table and as JSON, rewritten after every item so a cut run keeps its items; the JSON keys are
named after the score (``f1``, ``f1_ci95``, ``f1_gap_to_full``, ``f1_gap_ci95``; ``rouge_l``...).
Modes are specs (``load_tests/eval/strategies.py``): selection options ride on each request,
so a strategy sweep runs on the same prompts in one engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from gateway.rag.chunked_prompt import PrefixKind
from load_tests.eval.quality_rows import print_rows, summarize
from load_tests.eval.strategies import ModeSpec, parse_mode_spec
from load_tests.eval.summaries import DEFAULT_CHUNK_WORDS, DEFAULT_CHUNKS
from load_tests.eval.tasks import TASKS, EvalTask
from load_tests.report import output_path, scratch

DEFAULT_MODES = ["full", "reuse", "blend@0.05", "blend@0.1", "blend@0.15", "blend@0.3"]


async def answer(
    setup: Any, ids: list[int], spans: Any, spec: ModeSpec, task: EvalTask, salt: str
) -> tuple[str, float, float | None]:
    """The answer to the prompt ``ids`` (chunks at ``spans``) in mode ``spec``, its TTFT and the
    share of chunk tokens recomputed for it (None: unknown). Shared with ``retrieval_shaped``."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    from engine.contract import BlendPlan, BlendStats

    plan = BlendPlan(spec.recipe(setup.recipe), spans)
    params = SamplingParams(
        max_tokens=task.max_tokens,
        temperature=0,
        stop=list(task.stop),
        output_kind=RequestOutputKind.CUMULATIVE,
    )
    started, first, text = time.perf_counter(), None, ""
    reported: list[BlendStats] = []
    outputs = setup.engine.generate(salt, ids, params, plan, reported.append, cache_salt=salt)
    async for output in outputs:
        first = first or time.perf_counter()
        text = output.outputs[0].text
    stats = reported[-1] if reported else None
    chunk_tokens = sum(span.end - span.start for span in spans)
    if stats is None:
        # A blended answer without statistics (they were lost): the share is unknown.
        share = 1.0 if spec.mode == "full" else None
    else:
        share = 1.0 - stats.reused_tokens / chunk_tokens if chunk_tokens else 1.0
    return text.strip(), (first or time.perf_counter()) - started, share


def prompt(setup: Any, task: EvalTask, item: Any) -> tuple[list[int], Any]:
    """The item's prompt as ``task`` words it: its token ids and the spans of its chunks."""
    from gateway.openai.protocol import ChatMessage
    from gateway.rag.chunked_prompt import chat_with_chunks, completion_with_chunks, document_chunks

    chunks = document_chunks(item.documents, setup.tokenizer)
    text = task.prompt_text(item)
    if task.chat:
        turn = [ChatMessage(role="user", content=text)]
        chunked = chat_with_chunks(turn, chunks, setup.tokenizer)
    else:
        chunked = completion_with_chunks(text, chunks, setup.tokenizer)
    return chunked.token_ids, chunked.spans


async def evaluate(
    setup: Any,
    items: list[Any],
    modes: list[str],
    task: EvalTask,
    after_item: Callable[[dict[str, list[dict]]], None] | None = None,
    earlier: dict[str, list[dict]] | None = None,
) -> dict[str, list[dict]]:
    """Per mode, one record per item: the answer, its scores, TTFT, prompt length and recomputed
    share. ``after_item`` sees the records so far once every mode has answered an item; items
    ``earlier`` records (of a cut run) hold are kept, not asked again."""
    from engine.chunk_cache import ChunkCache
    from gateway.rag.chunked_prompt import document_chunks

    cache = ChunkCache(setup.engine, setup.prefix)
    specs = [parse_mode_spec(mode) for mode in modes]
    records: dict[str, list[dict]] = {mode: list((earlier or {}).get(mode, [])) for mode in modes}
    answered = {record["id"] for record in records[modes[0]]}
    for index, item in enumerate(items):
        if item.id in answered:
            continue
        for chunk in document_chunks(item.documents, setup.tokenizer).token_ids:
            await cache.precompute(chunk)  # stored before timing; a stored one is a hit
        ids, spans = prompt(setup, task, item)
        for spec in specs:
            salt = f"{spec.name}-{index}"
            text, ttft, share = await answer(setup, ids, spans, spec, task, salt)
            records[spec.name].append(
                {
                    "id": item.id,
                    "answer": text,
                    **task.score(item, text),
                    "ttft_s": ttft,
                    "prompt_tokens": len(ids),
                    "recomputed_share": share,
                }
            )
        key = task.scores[0]
        print(
            f"  item {index + 1}/{len(items)}: "
            + ", ".join(f"{mode}={records[mode][-1][key]:.2f}" for mode in modes),
            file=sys.stderr,
        )
        if after_item is not None:
            after_item(records)
    return records


def load_items(args: argparse.Namespace) -> list[Any]:
    """The dataset's items on the chosen side of the tune/held-out split, subsampled."""
    from load_tests.eval.prompts import split, subsample

    tune, held_out = split(TASKS[args.dataset].build(args), 0.5, args.seed)
    return subsample(tune if args.split == "tune" else held_out, args.items, args.seed)


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--data", default="data/eval/bigbench")
    parser.add_argument("--dataset", choices=sorted(TASKS), default="knowledge_conflicts")
    parser.add_argument("--split", choices=["tune", "held_out"], default="held_out")
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--distractors", type=int, default=5, help="QA only")
    parser.add_argument("--max-passage-words", type=int, default=400, help="QA only")
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="XSum only")
    parser.add_argument(
        "--min-chunk-words", type=int, default=DEFAULT_CHUNK_WORDS[0], help="XSum only"
    )
    parser.add_argument(
        "--max-chunk-words", type=int, default=DEFAULT_CHUNK_WORDS[1], help="XSum only"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kv-cache-gib", type=float, default=4, help="vLLM's KV cache (1 is plenty for QA)"
    )
    parser.add_argument(
        "--modes", nargs="+", default=DEFAULT_MODES, help="mode specs, see eval/strategies.py"
    )
    parser.add_argument("--metric", choices=["k", "v", "kv"], default="v")
    parser.add_argument("--check-layers", default="1:2,2:1.5,3:1")
    parser.add_argument("--head-tokens", type=int, default=8)
    parser.add_argument(
        "--chunk-prefix",
        choices=list(get_args(PrefixKind)),
        default="passages",
        help="what chunks are precomputed behind (RAGBLEND_CHUNK_PREFIX)",
    )
    parser.add_argument("--out", default=scratch("quality"), help="<out>.json")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the items a cut run with the same modes wrote to --out; ask only the rest",
    )
    return parser


def start_eval_engine(args: argparse.Namespace, workdir: Path, **options: Any) -> Any:
    """The in-process engine ``build_parser``'s options ask for, its chunk store in ``workdir``;
    ``options`` go to ``start_engine`` as they are. Shared with ``retrieval_shaped``."""
    from engine.contract import Recipe, parse_check_layers
    from load_tests.engine_setup import start_engine

    return start_engine(
        args.model,
        Path(args.models_dir),
        workdir,
        max_model_len=8192,
        prefix_kind=args.chunk_prefix,
        kv_cache_gib=args.kv_cache_gib,
        recipe=Recipe(
            metric=args.metric,
            check_layers=parse_check_layers(args.check_layers),
            chunk_head_tokens=args.head_tokens,
        ),
        **options,
    )


def main() -> int:
    args = build_parser().parse_args()

    from load_tests.eval.fetch import fetch_bigbench

    fetch_bigbench(Path(args.data))
    task = TASKS[args.dataset]
    items = load_items(args)
    modes = args.modes
    out = output_path(Path(args.out), ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(out.read_text())["records"] if args.resume and out.exists() else None
    if earlier is not None and list(earlier) != modes:
        raise SystemExit(f"--resume: {out} holds modes {list(earlier)}, not {modes}")

    def write(records: dict[str, list[dict]]) -> list[dict[str, Any]]:
        """The summary and the records so far into the JSON file: a cut run keeps its items."""
        rows = summarize(records, task.scores)
        document = {"settings": vars(args), "score": task.scores[0], "rows": rows}
        out.write_text(json.dumps({**document, "records": records}, indent=1))
        return rows

    with tempfile.TemporaryDirectory(prefix="quality-") as workdir:
        setup = start_eval_engine(args, Path(workdir))
        records = asyncio.run(evaluate(setup, items, modes, task, write, earlier))
        setup.engine.shutdown()
    print_rows(write(records), task.scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
