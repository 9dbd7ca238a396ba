"""A benchmark's parts each in a process of its own, so every part starts a fresh engine.

The parent runs itself again once per part with ``--<flag> <part> --<flag>-output <file>``
added to its own arguments; the child runs that part and writes its JSON result to the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any


def add_part_arguments(parser: argparse.ArgumentParser, flag: str, parts: list[str]) -> None:
    """The hidden ``--<flag>`` and ``--<flag>-output`` a child is run with."""
    parser.add_argument(f"--{flag}", choices=parts, help=argparse.SUPPRESS)
    parser.add_argument(f"--{flag}-output", help=argparse.SUPPRESS)


def run_part(module: str, flag: str, part: str) -> dict[str, Any]:
    """Run ``python -m module`` with this process's arguments for ``part``; its result."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{part}-") as workdir:
        output = Path(workdir) / "part.json"
        command = [sys.executable, "-m", module, f"--{flag}", part]
        command += [f"--{flag}-output", str(output), *sys.argv[1:]]
        subprocess.run(command, check=True)
        return json.loads(output.read_text())


def write_part(output: str, run: Callable[[Path], Coroutine[Any, Any, dict[str, Any]]]) -> None:
    """In the child: ``run`` a part in a scratch folder and write its result to ``output``."""
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as workdir:
        result = asyncio.run(run(Path(workdir)))
    Path(output).write_text(json.dumps(result))
