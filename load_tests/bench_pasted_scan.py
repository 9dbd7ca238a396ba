"""What `blend.segment` costs the gateway: remembering sent passages, scanning a prompt for them.

Made-up passages of random words (``--passage-chars`` each) are remembered as sent documents;
then a prompt holding ``--pasted`` of them among ``--prompt-chars`` of other text is scanned
(``KnownPassages.find``), ``--repeats`` times. Prints the time per remembered passage, the scan's
median time, the passages found, and the index's memory per passage (traced in a second pass,
which slows it, so not timed).

    .venv/bin/python -m load_tests.bench_pasted_scan --passages 100000 --prompt-chars 42000
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc

from gateway.rag.passage_index import KnownPassages


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--passage-chars", type=int, default=1500)
    parser.add_argument("--prompt-chars", type=int, default=42_000)
    parser.add_argument("--pasted", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def _text(rng: random.Random, words: list[str], chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def main() -> None:
    args = build_parser().parse_args()
    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(5000)]
    passages = [_text(rng, words, args.passage_chars) for _ in range(args.passages)]
    known = KnownPassages(args.passages)
    started = time.perf_counter()
    known.remember(passages)
    remember_us = (time.perf_counter() - started) / args.passages * 1e6
    pasted = rng.sample(passages, args.pasted)
    filler = _text(rng, words, max(0, args.prompt_chars - sum(map(len, pasted))))
    prompt = "Use the following pieces of context.\n" + "\n\n".join([*pasted, filler])
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        found = known.find(prompt)
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    traced = KnownPassages(args.passages)
    traced.remember(passages)
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"passages remembered: {args.passages} of {args.passage_chars} characters")
    print(f"remember: {remember_us:.1f} us per passage")
    print(f"scan of {len(prompt)} characters: {statistics.median(times) * 1e3:.1f} ms (median)")
    print(f"found: {len(found)} of {args.pasted} pasted")
    print(f"index memory: {index_bytes / args.passages:.0f} bytes per passage")


if __name__ == "__main__":
    main()
