"""A server on a new data directory starts without vLLM's inspection of the model's class (a
subprocess that imports vLLM, 11-13 s of a start on two cores): the record a server, or
``ragblend models --provision``, made before is kept beside the models, and vLLM takes the copy as
its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.model_records import RECORDS_FOLDER, record_model_class, shared_root
from tests.integration.conftest import REPO, TEST_MODEL, Server

pytestmark = pytest.mark.integration

CONFIGURE = """
import sys
from pathlib import Path
from engine.model_records import shared_model_records
from vllm.engine.arg_utils import EngineArgs
cache_root, shared, model = map(Path, sys.argv[1:])
with shared_model_records(cache_root, shared):
    EngineArgs(model=str(model), max_model_len=512, enforce_eager=True).create_engine_config()
"""
"""vLLM's configuration of a model, made as the engine makes it, under the shared records."""


def _configure_logging_inspections(cache_root: Path, shared: Path, model: Path) -> str:
    """vLLM's debug log of configuring ``model`` on a new cache root seeded from ``shared``."""
    env = {**os.environ, "VLLM_CACHE_ROOT": str(cache_root), "VLLM_LOGGING_LEVEL": "DEBUG"}
    done = subprocess.run(
        [sys.executable, "-c", CONFIGURE, str(cache_root), str(shared), str(model)],
        cwd=REPO,
        env={**env, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def _records(root: Path) -> list[str]:
    return sorted(path.name for path in (root / RECORDS_FOLDER).glob("*.json"))


def test_a_new_data_dir_reads_the_record_a_server_kept_beside_the_models(
    server: Server, tmp_path: Path
) -> None:
    shared = shared_root(server.models_dir)
    assert _records(shared), "the session's server kept no record beside the models"
    cache_root = tmp_path / "vllm"
    log = _configure_logging_inspections(cache_root, shared, server.models_dir / TEST_MODEL)
    assert "from cache" in log and "Loading model instead" not in log, log[-3000:]
    assert _records(cache_root) == _records(shared)


def test_provisioning_records_the_class_so_no_server_inspects_it(
    server: Server, tmp_path: Path
) -> None:
    models_dir = tmp_path / "models"
    model = server.models_dir / TEST_MODEL
    assert record_model_class(model, models_dir)
    assert _records(shared_root(models_dir))
    log = _configure_logging_inspections(tmp_path / "vllm", shared_root(models_dir), model)
    assert "from cache" in log and "Loading model instead" not in log, log[-3000:]
