"""The product's modules stay small and no function picks a tenant by default.

Files of one job under 250 lines are what keeps the code readable; a default on a project
argument is how a forgotten argument would read another tenant's data (a None default is how
one would read every tenant's: maintenance says `EVERY_PROJECT` out loud).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("gateway", "engine", "retriever")
MOST_LINES = 250


def _modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def test_no_product_module_is_over_250_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules(*PRODUCT)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert long == {}


def test_no_project_argument_has_a_default() -> None:
    defaulted = []
    for path in _modules(*PRODUCT):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults))
            defaults += node.args.defaults + node.args.kw_defaults
            for argument, default in zip(arguments, defaults, strict=True):
                if default is not None and "project" in argument.arg:
                    defaulted.append(f"{path.relative_to(ROOT)}:{node.name}({argument.arg})")
    assert defaulted == []
