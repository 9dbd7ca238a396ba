"""The gateway's folders stay layered: no module imports one from a layer above its own.

Bottom to top: the shared records (``outputs``, ``callers``), the settings, the HTTP plumbing,
the OpenAI shapes, the RAG planning, the app state, serving, the routes, the loading of the
services, the app and the CLI.
An upward import is how circles start; this reads every module's imports (type-only ones too).
"""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
LAYERS = [
    "outputs",
    "callers",
    "settings",
    "http",
    "openai",
    "rag",
    "state",
    "serve",
    "routes",
    "loading",
    "app",
    "cli",
]


def _layer(module: str) -> str:
    """``gateway.rag.x`` -> ``rag``; every ``*_settings`` module is ``settings``."""
    name = module.split(".")[1]
    return "settings" if name == "settings" or name.endswith("_settings") else name


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [module for module in found if module.startswith("gateway.")]


def upward_imports() -> list[str]:
    upward = []
    for path in sorted(GATEWAY.rglob("*.py")):
        relative = path.relative_to(GATEWAY.parent).with_suffix("")
        if len(relative.parts) < 2 or relative.parts[1] == "__init__":
            continue
        own = _layer(".".join(relative.parts))
        for module in _imports(path):
            other = _layer(module)
            assert other in LAYERS, f"{path}: {module} is in no layer; add its folder to LAYERS"
            if LAYERS.index(other) > LAYERS.index(own):
                upward.append(f"{relative} ({own}) imports {module} ({other})")
    return upward


def test_every_gateway_module_is_in_a_layer() -> None:
    folders = {p.name for p in GATEWAY.iterdir() if p.is_dir() and not p.name.startswith("_")}
    modules = {_layer(f"gateway.{p.stem}") for p in GATEWAY.glob("*.py") if p.stem != "__init__"}
    assert folders | modules <= set(LAYERS)


def test_no_gateway_module_imports_from_a_layer_above_it() -> None:
    assert upward_imports() == []
