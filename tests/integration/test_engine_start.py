"""A server on a new data directory starts without vLLM's inspection of the model's class (a
subprocess that imports vLLM, 11-13 s of a start on two cores): the record a server made before
is kept beside the models, and vLLM takes the copy as its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.model_records import RECORDS_FOLDER, records_beside
from tests.integration.conftest import REPO, Server

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
"""vLLM's configuration of the served model, made as the engine makes it, under the records."""


def test_a_new_data_dir_reads_vllms_record_from_beside_the_models(
    server: Server, tmp_path: Path
) -> None:
    shared = records_beside(server.models_dir)
    assert sorted(shared.glob("*.json")), "the session's server kept no record beside the models"
    cache_root = tmp_path / "vllm"
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(cache_root),
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HUB_OFFLINE": "1",
    }
    model = server.models_dir / server.model
    done = subprocess.run(
        [sys.executable, "-c", CONFIGURE, str(cache_root), str(shared), str(model)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr
    assert "from cache" in log and "Loading model instead" not in log, log[-3000:]
    assert sorted(path.name for path in (cache_root / RECORDS_FOLDER).iterdir()) == sorted(
        path.name for path in shared.glob("*.json")
    )
