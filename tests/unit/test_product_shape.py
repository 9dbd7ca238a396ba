"""The product's modules stay small and no layer below the gateway picks a tenant by default.

Files of one job under 250 lines are what keeps the code readable; a default project on a
retriever or engine argument is how a forgotten argument would read another tenant's data.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("gateway", "engine", "retriever")
MOST_LINES = 250


def _modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def _is_none(node: ast.expr) -> bool:
    """A None default: the stores' "every project" (used by maintenance, not requests)."""
    return isinstance(node, ast.Constant) and node.value is None


def test_no_product_module_is_over_250_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules(*PRODUCT)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert long == {}


def test_nothing_below_the_gateway_defaults_to_a_project() -> None:
    defaulted = []
    for path in _modules("engine", "retriever"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults))
            defaults += node.args.defaults + node.args.kw_defaults
            for argument, default in zip(arguments, defaults, strict=True):
                names_a_project = default is not None and not _is_none(default)
                if names_a_project and "project" in argument.arg:
                    defaulted.append(f"{path.relative_to(ROOT)}:{node.name}({argument.arg})")
    assert defaulted == []
