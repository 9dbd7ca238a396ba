"""Print the project's dependencies plus those of the named extras, one requirement a line.

The Dockerfiles install these before copying the sources, so that the heavy dependency layer
is rebuilt only when pyproject.toml changes::

    python pyproject_requirements.py pyproject.toml cpu retrieval > requirements.txt
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path


def requirements(pyproject: Path, extras: Sequence[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    unknown = sorted(set(extras) - optional.keys())
    if unknown:
        raise ValueError(f"{pyproject} defines no extra {', '.join(unknown)}")
    return [*project.get("dependencies", []), *(req for extra in extras for req in optional[extra])]


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: pyproject_requirements.py PYPROJECT [EXTRA ...]", file=sys.stderr)
        return 2
    try:
        print("\n".join(requirements(Path(argv[0]), argv[1:])))
    except (OSError, ValueError) as exc:
        print(f"pyproject_requirements.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
