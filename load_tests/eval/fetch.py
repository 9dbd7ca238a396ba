"""Fetch the BIG-bench task files the quality harness needs, once, into a local cache.

The data comes from the PyPI source archive ``bigbench==1.0.0`` (~358 MB ``.tar.gz``), downloaded
with ``pip download``; only a few task folders are extracted and the archive is then deleted.
pip >= 26.3 refuses the archive because its metadata declares a ``file://`` dependency (bleurt);
an older pip found as ``python3 -m pip`` is then tried, or pass ``--pip`` explicitly.

Usage: ``python -m load_tests.eval.fetch [--cache DIR] [--pip "python3 -m pip"] [--force]``
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

PACKAGE = "bigbench==1.0.0"
DEFAULT_CACHE = Path("data/eval/bigbench")
MARKER = ".fetched.json"
TASKS_ROOT = "bigbench/benchmark_tasks"
TASKS = (
    "contextual_parametric_knowledge_conflicts",
    "natural_instructions/subtask002_quoref_answer_generation",
    "disfl_qa",
    "gem/xsum",
)
_PIP_REJECTS_ARCHIVE = "cannot declare direct URL dependencies"


class FetchError(RuntimeError):
    """The archive could not be downloaded or held none of the wanted tasks."""


def pip_commands(pip: str | None) -> list[list[str]]:
    """Pip commands to try in order: the given one, else this interpreter's pip then python3's."""
    if pip:
        return [shlex.split(pip)]
    commands = [[sys.executable, "-m", "pip"]]
    other = shutil.which("python3")
    if other and Path(other).resolve() != Path(sys.executable).resolve():
        commands.append([other, "-m", "pip"])
    return commands


def _run_pip(command: list[str], dest: Path) -> tuple[int, str]:
    """Run one ``pip download``, echoing its output; return (exit code, last output lines)."""
    args = [*command, "download", "--no-deps", "--no-binary", ":all:", PACKAGE, "-d", str(dest)]
    print(f"[fetch] running: {shlex.join(args)}", flush=True)
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"[pip] {line}", end="", flush=True)
            tail.append(line)
    return proc.returncode, "".join(tail)


def download_archive(dest: Path, pip: str | None = None) -> Path:
    """Download the sdist into ``dest`` and return its path; raise FetchError on failure."""
    failures = []
    for command in pip_commands(pip):
        try:
            code, output = _run_pip(command, dest)
        except OSError as exc:
            failures.append(f"{shlex.join(command)}: {exc}")
            continue
        archives = sorted(dest.glob("bigbench-*.tar.gz"))
        if code == 0 and archives:
            return archives[0]
        failures.append(f"{shlex.join(command)} exited {code}:\n{output.strip()}")
        if _PIP_REJECTS_ARCHIVE not in output:
            break  # only the metadata rejection is worth retrying with another pip
    hint = (
        "\nHint: pip >= 26.3 rejects bigbench's metadata; rerun with --pip pointing to pip < 26.3."
        if any(_PIP_REJECTS_ARCHIVE in f for f in failures)
        else ""
    )
    raise FetchError(f"pip download {PACKAGE} failed:\n" + "\n\n".join(failures) + hint)


def _task_relpath(member: str, tasks: tuple[str, ...]) -> PurePosixPath | None:
    """Path below ``benchmark_tasks`` if the member lies in one of ``tasks``, else None."""
    _, sep, below = member.partition(f"/{TASKS_ROOT}/")
    if not sep:
        return None
    rel = PurePosixPath(below)
    if ".." in rel.parts or rel.is_absolute():
        return None
    return rel if any(below.startswith(f"{task}/") for task in tasks) else None


def extract_tasks(archive: Path, cache: Path, tasks: tuple[str, ...] = TASKS) -> dict[str, str]:
    """Extract the regular files of ``tasks`` into ``cache``; return {relative path: sha256}."""
    written: dict[str, str] = {}
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            rel = _task_relpath(member.name, tasks)
            if rel is None or not member.isfile():
                continue
            source = tar.extractfile(member)
            assert source is not None
            data = source.read()
            target = cache / Path(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written[rel.as_posix()] = hashlib.sha256(data).hexdigest()
            print(f"[fetch] extracted {rel} ({len(data) / 1e6:.1f} MB)", flush=True)
    return written


def is_fetched(cache: Path, tasks: tuple[str, ...] = TASKS) -> bool:
    """True when a fetch covered every wanted task (found or not) and its files still exist."""
    marker = cache / MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text())
    except ValueError:
        return False
    files = info.get("files", {})
    return set(tasks) <= set(info.get("requested", [])) and all(
        (cache / f).is_file() for f in files
    )


def fetch_bigbench(
    cache: Path = DEFAULT_CACHE, pip: str | None = None, force: bool = False
) -> Path:
    """Make sure the task files are in ``cache`` (download once); return ``cache``."""
    if not force and is_fetched(cache):
        print(f"[fetch] already present in {cache} (marker {MARKER}); nothing to do", flush=True)
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bigbench-dl-", dir=cache.parent) as tmp:
        archive = download_archive(Path(tmp), pip)
        print(f"[fetch] archive {archive.name}: {archive.stat().st_size / 1e6:.0f} MB", flush=True)
        files = extract_tasks(archive, cache)
        archive.unlink()
    found = sorted(t for t in TASKS if any(f.startswith(f"{t}/") for f in files))
    for task in sorted(set(TASKS) - set(found)):
        print(f"[fetch] warning: task {task} not in the archive", flush=True)
    if not found:
        raise FetchError(f"no wanted task folder under {TASKS_ROOT}/ in the {PACKAGE} archive")
    info = {"package": PACKAGE, "requested": list(TASKS), "tasks": found, "files": files}
    (cache / MARKER).write_text(json.dumps(info, indent=2) + "\n")
    print(f"[fetch] done: {len(files)} files for {len(found)} tasks in {cache}", flush=True)
    return cache


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description="Fetch BIG-bench evaluation tasks once.")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="cache directory")
    parser.add_argument("--pip", default=None, help='pip command, e.g. "python3 -m pip"')
    parser.add_argument("--force", action="store_true", help="download again even if present")
    args = parser.parse_args(argv)
    try:
        fetch_bigbench(args.cache, pip=args.pip, force=args.force)
    except FetchError as exc:
        print(f"[fetch] error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
