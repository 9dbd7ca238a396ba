"""A generated table kept in a Markdown file between two marker comments, and the command line of
the script that generates it: print the table, rewrite it in place (``--write``), or exit 1 when
the file's copy is stale (``--check``). Used by ``settings_table.py`` (the README's settings) and
``helm_values_table.py`` (the chart's values in docs/deploy-kubernetes.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MarkedTable:
    doc: Path
    start: str
    end: str
    name: str
    """What the table lists, for messages: ``settings table``."""
    script: str
    """The generating script, as a user runs it: ``scripts/settings_table.py``."""

    def split(self, text: str) -> tuple[str, str, str]:
        """The file before the table (markers included), the table, and the rest."""
        start, end = text.find(self.start), text.find(self.end)
        if start < 0 or end < start:
            raise ValueError(f"{self.doc.name} has no {self.start!r} ... {self.end!r} markers")
        head_end = start + len(self.start) + 1
        return text[:head_end], text[head_end:end], text[end:]

    def with_table(self, text: str, generated: str) -> str:
        head, _, tail = self.split(text)
        return head + generated + tail

    def main(self, generate: Callable[[], str], description: str, argv: list[str] | None) -> int:
        parser = argparse.ArgumentParser(description=description)
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--write", action="store_true", help="rewrite the file's table")
        action.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
        parser.add_argument("--doc", type=Path, default=self.doc, help="default: %(default)s")
        args = parser.parse_args(argv)
        generated = generate()
        if not (args.write or args.check):
            sys.stdout.write(generated)
            return 0
        text = args.doc.read_text(encoding="utf-8")
        wanted = self.with_table(text, generated)
        if args.check:
            if wanted != text:
                print(
                    f"{args.doc}: the {self.name} is stale; run python {self.script} --write",
                    file=sys.stderr,
                )
                return 1
            return 0
        if wanted != text:
            args.doc.write_text(wanted, encoding="utf-8")
            print(f"{args.doc}: {self.name} rewritten", file=sys.stderr)
        return 0
