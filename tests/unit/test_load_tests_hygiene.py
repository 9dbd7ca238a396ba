"""The benchmark harness keeps to itself: a run writes into a scratch folder, never over a result
published in docs/bench/ unless `--out` says so, and load_tests imports nothing from tests nor
another module's private names (the installed package has no `tests`)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from load_tests.report import RESULTS_DIR

REPO = Path(__file__).resolve().parents[2]
SCRATCH = REPO / RESULTS_DIR
REQUIRED = {
    "load_tests.eval.frontier": ["run.json"],
    "load_tests.eval.format_exact": ["--url", "http://127.0.0.1:1", "--data-dir", "d"],
    "load_tests.eval.format_gap": ["--raw-url", "http://a", "--compressed-url", "http://b"],
}
"""The arguments a tool cannot run without; the others take none."""
TOOLS = [
    ("load_tests.bench_blend", "out"),
    ("load_tests.bench_sweep", "out"),
    ("load_tests.bench_paged_attention", "out"),
    ("load_tests.profile_blend", "out"),
    ("load_tests.bench_replicas", "json_out"),
    ("load_tests.eval.quality", "out"),
    ("load_tests.eval.frontier", "out"),
    ("load_tests.eval.format_exact", "out"),
    ("load_tests.eval.format_gap", "out"),
    ("load_tests.eval.retrieval_shaped", "out"),
    ("load_tests.bench_retrieval", "out"),
    ("load_tests.bench_retrieval_answers", "out"),
    ("load_tests.bench_search_latency", "out"),
    ("load_tests.bench_learnt", "out"),
    ("load_tests.bench_project_kv", "out"),
    ("load_tests.bench_slow_hits", "out"),
    ("load_tests.bench_blend_maths", "out"),
    ("load_tests.bench_tools", "out"),
]


def _modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _default_out(module_name: str, attribute: str) -> Path:
    module = importlib.import_module(module_name)
    argv = REQUIRED.get(module_name, [])
    if hasattr(module, "parse_args"):  # a tool that checks its arguments after parsing
        args = module.parse_args(argv)
    else:
        args = module.build_parser().parse_args(argv)
    path = Path(getattr(args, attribute))
    return (path if path.is_absolute() else REPO / path).resolve()


@pytest.mark.parametrize(("module_name", "attribute"), TOOLS)
def test_a_benchmark_writes_into_the_scratch_folder_by_default(
    module_name: str, attribute: str
) -> None:
    out = _default_out(module_name, attribute)
    assert out.is_relative_to(SCRATCH), out
    assert not out.is_relative_to(REPO / "docs"), out


def test_rag_load_writes_into_the_scratch_folder_by_default() -> None:
    """Its parser is built inside ``main``: the default is read from the call that adds it."""
    tree = ast.parse((REPO / "load_tests" / "rag_load.py").read_text())
    defaults = [
        keyword.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "--json-out"
        for keyword in node.keywords
        if keyword.arg == "default"
    ]
    assert len(defaults) == 1 and (REPO / defaults[0]).resolve().is_relative_to(SCRATCH)


def test_git_ignores_the_scratch_folder() -> None:
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert f"{RESULTS_DIR.as_posix()}/" in ignored


def test_no_harness_code_names_a_path_under_docs_as_a_default() -> None:
    """A string under docs/ outside a docstring is an output path a run would overwrite."""
    offenders = []
    for path in _modules("load_tests"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and node.value.startswith("docs/")
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert offenders == []


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) for every import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


def test_load_tests_imports_nothing_from_tests() -> None:
    offenders = [
        f"{path.relative_to(REPO)}: {module}"
        for path in _modules("load_tests")
        for module, _ in _imports(path)
        if module == "tests" or module.startswith("tests.")
    ]
    assert offenders == []


def test_the_product_imports_neither_tests_nor_load_tests() -> None:
    offenders = [
        f"{path.relative_to(REPO)}: {module}"
        for package in ("gateway", "retriever", "engine")
        for path in _modules(package)
        for module, _ in _imports(path)
        if module.split(".")[0] in ("tests", "load_tests")
    ]
    assert offenders == []


def test_no_harness_module_imports_a_private_name_of_another() -> None:
    offenders = [
        f"{path.relative_to(REPO)}: {module}.{name}"
        for path in _modules("load_tests")
        for module, names in _imports(path)
        if module.split(".")[0] == "load_tests"
        for name in names
        if name.startswith("_")
    ]
    assert offenders == []
