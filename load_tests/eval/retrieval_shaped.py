"""Answer quality on retrieval-shaped prompts, chunks precomputed behind the fixed prefix or behind
their nearest neighbours (issue 15), in one in-process engine.

    python -m load_tests.eval.retrieval_shaped --split tune --items 100 \\
        --out docs/bench/neighbours_kc_tune_0.5b

The QA items' documents (gold + distractors) are pooled into one library, embedded with the
project's embedder (``retriever.Embedder``) into a flat FAISS index (``retriever.VectorIndex``);
each question retrieves its top ``--top-k`` passages, which stand in the prompt most relevant
LAST, right before the question. Chunk-context variants: ``passages``, every retrieved passage
precomputed behind the fixed prefix (today's behaviour); ``neighbours``, each precomputed behind
its ``--neighbours`` nearest other passages of the library by embedding, most similar last
(``ChunkCache.precompute(chunk, context)``); ``learnt``, right before its item is asked, the
item's passages computed in one pass behind its prompt's own head, each behind the passages
before it (``ChunkCache.learn``), as the server's learnt contexts (``RAGBLEND_LEARN_CONTEXTS``)
store repeated sent documents; ``learnt_elsewhere``, the same but behind the head of that prompt
with a system message, as a server serves a set learnt behind another request's head;
``reordered``, the item's passages first computed in one pass in the reverse order behind the
prompt's head, as a server stores the chunks of a first sighting, then asked in their own order
(sent documents seen again re-ordered). Items run
in batches (``--batch-items``): per batch each variant precomputes the batch's passages,
replacing what the previous one stored, then asks every mode (a mode written ``variant:mode``,
as ``learnt:reuse``, only under that variant); full prefill
does not depend on the variant and runs once. The report is rewritten after every batch, so a
cut run keeps the batches it finished (``--resume`` runs the rest). Reports per variant and
mode: F1, its paired gap to full with a 95% interval, agreement with
full, and the gold passage's recall in the top k. Prompts, decoding and scores are
``quality.py``'s. With ``--dataset xsum`` nothing is retrieved: every article's chunks form the
library (and each other's neighbours), each item keeps its own chunks in order, and the score is
Rouge-L.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from load_tests.eval.passage_library import PassageLibrary, retrieved, retrieved_items
from load_tests.eval.quality import answer, build_parser, load_items, prompt, start_eval_engine
from load_tests.eval.quality_rows import summarize
from load_tests.eval.strategies import parse_mode_spec
from load_tests.eval.tasks import TASKS, EvalTask
from load_tests.report import output_path, scratch

VARIANTS = ("passages", "neighbours", "learnt", "learnt_elsewhere", "reordered")
LEARNT = ("learnt", "learnt_elsewhere", "reordered")
OTHER_SYSTEM = "You answer questions from the documents you are given."
"""The system message of the head ``learnt_elsewhere`` learns behind (the asked prompt has none)."""


async def precompute_variant(
    setup: Any, cache: Any, library: PassageLibrary, items: list[Any], variant: str, k: int
) -> None:
    """Store every retrieved passage's KV for ``variant``, replacing any stored before
    (``learnt`` stores each item's passages when it is asked: `learn_item`)."""
    from gateway.rag.chunked_prompt import document_chunks

    if variant in LEARNT:
        return
    used = list(dict.fromkeys(doc for item in items for doc in item.documents))
    position = {text: pid for pid, text in enumerate(library.passages)}
    chunks = document_chunks(library.passages, setup.tokenizer)
    tokens, separator = chunks.token_ids, list(chunks.separator)
    for count, text in enumerate(used, 1):
        pid = position[text]
        context = None
        if variant == "neighbours":
            context = [tokens[other] + separator for other in library.neighbours(pid, k)]
        await cache.precompute(tokens[pid], context=context, replace=True)
        if count % 50 == 0:
            print(f"  {variant}: precomputed {count}/{len(used)}", file=sys.stderr)


async def learn_item(setup: Any, cache: Any, documents: list[str], head: list[int]) -> None:
    """Passages stored as the server learns them once they keep arriving together, and as it
    stores a first sighting's: computed in one pass behind ``head``, each behind the passages
    before it, replacing what was stored."""
    from gateway.rag.chunked_prompt import document_chunks

    chunks = document_chunks(documents, setup.tokenizer)
    await cache.learn(head, chunks.token_ids, chunks.separator)


async def evaluate(
    setup: Any,
    library: PassageLibrary,
    items: list[Any],
    args: argparse.Namespace,
    records: dict[str, list[dict]],
) -> dict[str, list[dict]]:
    """Records per ``variant:mode`` (``full`` once) added to ``records`` (the items they hold
    already are skipped), reported to ``args.out`` after each batch."""
    from engine.chunk_cache import ChunkCache
    from gateway.rag.chunked_prompt import chunk_prefix

    task: EvalTask = TASKS[args.dataset]
    head_len = len(chunk_prefix(setup.tokenizer, "chat"))
    cache = ChunkCache(setup.engine, setup.prefix, head_len)
    specs = variant_specs(args.modes, args.variants)
    for start in range(len(records.get("full", [])), len(items), args.batch_items):
        batch = items[start : start + args.batch_items]
        for variant in args.variants:
            await precompute_variant(setup, cache, library, batch, variant, args.neighbours)
            learn = cache if variant in LEARNT else None
            await ask_batch(setup, batch, start, variant, specs[variant], records, task, learn)
        write_report(records, args)
    return records


def other_head(setup: Any, task: EvalTask, item: Any) -> list[int]:
    """The head of the item's prompt with a system message: what ``learnt_elsewhere`` learns
    behind, as a server learns a set behind one request's head and serves it behind another's."""
    from gateway.openai.protocol import ChatMessage
    from gateway.rag.chunked_prompt import chat_with_chunks, document_chunks

    if not task.chat:
        raise SystemExit("learnt_elsewhere needs a chat task")
    messages = [
        ChatMessage(role="system", content=OTHER_SYSTEM),
        ChatMessage(role="user", content=task.prompt_text(item)),
    ]
    chunks = document_chunks(item.documents, setup.tokenizer)
    placed = chat_with_chunks(messages, chunks, setup.tokenizer)
    return placed.token_ids[: placed.spans[0].start]


def variant_specs(modes: list[str], variants: list[str]) -> dict[str, list[Any]]:
    """Per variant, the mode specs asked under it: every mode, but one written
    ``variant:mode`` (``learnt:reuse``) only under that variant."""
    chosen: dict[str, list[Any]] = {variant: [] for variant in variants}
    for mode in modes:
        scope, _, name = mode.rpartition(":")
        if scope and scope not in chosen:
            raise SystemExit(f"{mode!r}: {scope!r} is not one of --variants {variants}")
        spec = parse_mode_spec(name)
        if scope and spec.mode == "full":
            raise SystemExit(f"{mode!r}: full prefill does not depend on the variant")
        for variant in [scope] if scope else variants:
            chosen[variant].append(spec)
    return chosen


async def ask_batch(
    setup: Any,
    batch: list[Any],
    start: int,
    variant: str,
    specs: list[Any],
    records: dict[str, list[dict]],
    task: EvalTask,
    learn: Any = None,
) -> None:
    """Every mode on every item of ``batch`` (items ``start``...), added to ``records``; with a
    chunk cache to ``learn`` with, each item's passages are first stored as `learn_item` does."""
    for index, item in enumerate(batch, start):
        ids, spans = prompt(setup, task, item)
        if learn is not None:
            head = ids[: spans[0].start]
            if variant == "learnt_elsewhere":
                head = other_head(setup, task, item)
            documents = item.documents[::-1] if variant == "reordered" else item.documents
            await learn_item(setup, learn, documents, head)
        for spec in specs:
            name = spec.name if spec.mode == "full" else f"{variant}:{spec.name}"
            if name in records and len(records[name]) > index:
                continue  # full prefill, already asked with the first variant
            text, ttft, share = await answer(setup, ids, spans, spec, task, f"{name}-{index}")
            records.setdefault(name, []).append(
                {
                    "id": item.id,
                    "answer": text,
                    **task.score(item, text),
                    "ttft_s": ttft,
                    "prompt_tokens": len(ids),
                    "recomputed_share": share,
                    **({"gold_retrieved": item.gold_index >= 0} if retrieved(item) else {}),
                }
            )
        print(
            f"  {variant} item {index + 1}: "
            + ", ".join(
                f"{name}={rows[-1][task.scores[0]]:.2f}/{_share(rows[-1])}"
                for name, rows in records.items()
                if len(rows) == index + 1
            ),
            file=sys.stderr,
        )


def _share(record: dict[str, Any]) -> str:
    share = record.get("recomputed_share")
    return "?" if share is None else f"{share:.3f}"


def report_rows(records: dict[str, list[dict]], scores: tuple[str, ...]) -> list[dict[str, Any]]:
    """``quality.summarize``'s rows with the gold passage's recall in the top k."""
    rows = summarize(records, scores)
    for row in rows:
        results = records[row["mode"]]
        if all("gold_retrieved" in r for r in results):
            row["gold_recall"] = round(sum(r["gold_retrieved"] for r in results) / len(results), 4)
    return rows


def finished_records(args: argparse.Namespace, items: list[Any]) -> dict[str, list[dict]]:
    """With ``--resume``, the records of the batches a cut run of the same items finished."""
    path = output_path(Path(args.out), ".json")
    if not args.resume or not path.exists():
        return {}
    records = json.loads(path.read_text())["records"]
    done = [record["id"] for record in records["full"]]
    if done != [item.id for item in items[: len(done)]] or len(done) % args.batch_items:
        raise SystemExit(f"{path} holds other items or a cut batch: cannot resume from it")
    return records


def write_report(records: dict[str, list[dict]], args: argparse.Namespace) -> None:
    key = TASKS[args.dataset].scores[0]
    rows = report_rows(records, TASKS[args.dataset].scores)
    for row in rows:
        gap, (low, high) = row.get(f"{key}_gap_to_full", 0.0), row.get(f"{key}_gap_ci95", (0, 0))
        recall = f"  gold recall {row['gold_recall']:.2f}" if "gold_recall" in row else ""
        print(
            f"{row['mode']:28} {key} {row[key]:.3f}  gap {gap:+.3f} [{low:+.3f}, {high:+.3f}]  "
            f"agree {row.get('agree_with_full', 1.0):.2f}  share {_share(row)}  "
            f"TTFT {row['median_ttft_s']:.3f}s{recall}"
        )
    document = {"settings": vars(args), "score": key, "rows": rows, "records": records}
    out = output_path(Path(args.out), ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=1))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--top-k", type=int, default=6, help="passages retrieved per question")
    parser.add_argument("--neighbours", type=int, default=3, help="context passages per chunk")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument(
        "--batch-items", type=int, default=25, help="items per round of every variant"
    )
    parser.set_defaults(out=scratch("neighbours"))
    args = parser.parse_args(argv)
    if args.chunk_prefix != "passages":
        parser.error("neighbour contexts take the place of --chunk-prefix passages' passages")
    return args


def main() -> int:
    args = parse_args()

    from load_tests.eval.fetch import fetch_bigbench
    from retriever import Embedder

    fetch_bigbench(Path(args.data))
    embedder = Embedder()
    pooled = load_items(args)
    library = PassageLibrary.of(pooled, embedder)
    items = pooled
    if args.dataset != "xsum":
        items = retrieved_items(pooled, library, embedder, args.top_k)
    print(f"library: {len(library.passages)} passages, {len(items)} items", file=sys.stderr)
    records = finished_records(args, items)
    with tempfile.TemporaryDirectory(prefix="retrieval-shaped-") as workdir:
        setup = start_eval_engine(args, Path(workdir), memory_bytes=1 << 30)
        asyncio.run(evaluate(setup, library, items, args, records))
        setup.engine.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
