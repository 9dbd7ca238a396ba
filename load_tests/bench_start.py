"""How long `ragblend serve` takes from launch to its first 200 on /health, by what its folders
already hold (and from SIGINT to exit): a new data directory beside models with vLLM's records of
their classes (`engine/model_records.py`), a new data directory without those records (every new
data directory before them), and a restart on a data directory used before. Each round starts
the three in turn, so a machine's drift falls on all of them alike; the first is a warm-up.

For the start without records the shared records are moved aside and put back afterwards: run it
while no other server uses the models directory.

With ``--cpu-compile`` every server compiles its model (`RAGBLEND_CPU_COMPILE`): the two new
data directories compile it from nothing, the restart finds its compiled code kept.

Usage: python -m load_tests.bench_start [--model NAME] [--models-dir DIR] [--rounds N]
    [--cpu-compile] [--out STEM]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.model_records import RECORDS_FOLDER, shared_root
from load_tests.replica_launcher import add_model_arguments, bench_environment, running_replicas
from load_tests.report import format_grid, output_path, parse_rounds, scratch, write_json

KINDS = ("new data dir, records kept", "new data dir, no records", "restart, same data dir")


def start_and_stop(folder: Path, name: str, environment: dict[str, str]) -> tuple[float, float]:
    """Seconds from launch to ready (polled each second) of one server on data dir
    `folder`/`name`, and from SIGINT to its exit (no request open)."""
    started = time.monotonic()
    with running_replicas([name], folder, environment):
        ready = time.monotonic() - started
        stopping = time.monotonic()
    return ready, time.monotonic() - stopping


@contextmanager
def records_aside(models_dir: Path) -> Iterator[None]:
    """The shared records out of reach for the block, then as they were."""
    records = shared_root(models_dir) / RECORDS_FOLDER
    aside = records.with_name(RECORDS_FOLDER + ".bench-aside")
    if records.exists():
        records.rename(aside)
    try:
        yield
    finally:
        shutil.rmtree(records, ignore_errors=True)
        if aside.exists():
            aside.rename(records)


def one_round(
    folder: Path, environment: dict[str, str], models_dir: Path
) -> list[tuple[float, float]]:
    """(ready, stop) of the three starts of `KINDS`, in that order."""
    kept = start_and_stop(folder, "kept", environment)
    with records_aside(models_dir):
        bare = start_and_stop(folder, "bare", environment)
    again = start_and_stop(folder, "kept", environment)
    return [kept, bare, again]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--cpu-compile", action="store_true", help="servers compile the model")
    parser.add_argument("--out", default=scratch("start"))
    args = parse_rounds(parser)
    environment = bench_environment(args, RAGBLEND_CPU_COMPILE=str(args.cpu_compile).lower())
    models_dir = Path(args.models_dir).resolve()
    rounds: list[list[float]] = []
    stops: list[float] = []
    for index in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-start-") as folder:
            starts = one_round(Path(folder), environment, models_dir)
        rounds.append([ready for ready, _ in starts])
        stops.extend(stop for _, stop in starts)
        print(f"round {index + 1}: " + ", ".join(f"{s:.1f} s" for s in rounds[-1]), flush=True)
    measured = rounds[1:]
    medians = {kind: statistics.median(r[i] for r in measured) for i, kind in enumerate(KINDS)}
    base = medians[KINDS[1]]
    rows = [[kind, f"{value:.1f} s", f"{base / value:.2f}x"] for kind, value in medians.items()]
    print(format_grid(["start", "median to ready", "vs no records"], rows))
    print(f"stop (SIGINT to exit, every start): median {statistics.median(stops):.1f} s")
    document = {
        "model": args.model,
        "cpu_compile": args.cpu_compile,
        "rounds": args.rounds,
        "seconds": {kind: [r[i] for r in rounds] for i, kind in enumerate(KINDS)},
        "median_s": medians,
        "stop_s": stops,
    }
    write_json(output_path(args.out, ".json"), document)


if __name__ == "__main__":
    main()
