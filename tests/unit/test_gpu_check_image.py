"""`scripts/gpu-check.sh` runs where the project's serving packages are not installed.

The GPU machine lent to some sessions holds PyTorch, transformers and pytest but neither vLLM
nor the gateway's packages, and a session has minutes of it. A module of the GPU check that
imports one of them (the lossless codec's zstandard once did) would fail there, after the
machine had started. So the script's own test files and benchmark modules, read from the
script, are imported and its tests run here with those packages hidden from the import system.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"

NOT_ON_THE_GPU_IMAGE = [
    "vllm",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "pydantic_core",
    "pydantic_settings",
    "gguf",
    "openai",
    "psycopg",
    "zstandard",
    "jsonschema",
    "faiss",
    "pypdf",
    "redis",
    "pytest_asyncio",
]
"""Top-level modules of the project's dependencies that the GPU machine's image lacks."""

HIDING = """
import importlib.machinery, sys
hidden = set(sys.argv[1].split(","))
class Hiding(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            return None
        return super().find_spec(name, path, target)
sys.meta_path[:] = [
    Hiding if finder is importlib.machinery.PathFinder else finder for finder in sys.meta_path
]
"""
"""Puts a path finder that does not see `hidden` in the place of Python's own, so a hidden
package is absent both to `import` and to `importlib.util.find_spec` probes."""

RUN = """
import importlib, pytest
for module in sys.argv[2].split(","):
    importlib.import_module(module)
if sys.argv[3:]:  # no test files: imports only (pytest would collect everything)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *sys.argv[3:]]))
"""


def gpu_check_parts() -> tuple[list[str], list[str]]:
    """The test files and the `python -m` modules that the GPU check script runs (its
    comments left out: they name this test, which would then run itself)."""
    lines = SCRIPT.read_text().splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    tests = sorted(set(re.findall(r"tests/unit/test_\w+\.py", text)))
    modules = sorted(set(re.findall(r"-m (load_tests\.\w+)", text)))
    return tests, modules


def run_hidden(
    hidden: list[str], modules: list[str], tests: list[str]
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-c", HIDING + RUN, ",".join(hidden), ",".join(modules), *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_script_names_its_tests_and_benchmarks() -> None:
    tests, modules = gpu_check_parts()
    assert "tests/unit/test_blend_on_cuda.py" in tests
    assert {"load_tests.bench_blend_maths", "load_tests.count_blend_ops"} <= set(modules)
    assert all((ROOT / test).is_file() for test in tests)
    assert Path(__file__).relative_to(ROOT).as_posix() not in tests


def test_the_gpu_check_needs_none_of_the_serving_packages() -> None:
    tests, modules = gpu_check_parts()
    result = run_hidden(NOT_ON_THE_GPU_IMAGE, modules, tests)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


def test_a_hidden_package_is_missing_to_the_check() -> None:
    """The hiding works: the engine's served path needs vLLM and fails to import without it."""
    result = run_hidden(["vllm"], ["engine.connector.metadata"], [])
    assert result.returncode != 0
    assert "No module named 'vllm'" in result.stderr
