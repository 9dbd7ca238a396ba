"""Share vLLM's records of model classes between data directories, so a fresh one starts faster.

Before it starts an engine, vLLM inspects the model's class (what it supports: pipeline
parallelism, pooling, multimodal input, ...) in a subprocess that imports vLLM: 11-13 s of a
35-50 s start on two cores. It skips that when its cache root (``VLLM_CACHE_ROOT``, here
``<data_dir>/vllm``) already holds a record of the class, so every server on a new data directory
(a test's, a new replica's, a user's second library) paid it again. A record depends only on
vLLM's own source file, whose hash it carries and vLLM checks when reading it: one made for one
data directory serves every other. Servers keep copies in a cache root of their own beside the
models (`shared_root`), which ``ragblend models --provision`` fills ahead of time (so an image
with its models baked in starts every replica without the inspection), and a new data directory
starts with them; a stale copy only costs the inspection it would have cost anyway, after which
the fresh record replaces it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.kvstore.atomic import write_synced_temp

RECORDS_FOLDER = "modelinfos"
"""Where vLLM keeps them under its cache root (``vllm/model_executor/models/registry.py``)."""
_INSPECT = "import sys; from vllm.config import ModelConfig; ModelConfig(model=sys.argv[1])"
"""vLLM's configuration of a model, which inspects its class unless the cache root has a record."""
log = logging.getLogger(__name__)


def shared_root(models_dir: Path) -> Path:
    """The servers' shared copies: a vLLM cache root holding only model records, among the
    converted models."""
    return models_dir / ".vllm-model-records"


def record_model_class(model_dir: Path, models_dir: Path) -> bool:
    """Have vLLM inspect ``model_dir``'s class now, in a subprocess that imports vLLM (about
    20 s on two cores), and keep its record in `shared_root`; False (logged) if it could not."""
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(shared_root(models_dir)),
        "VLLM_LOGGING_LEVEL": "ERROR",
        "VLLM_NO_USAGE_STATS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    command = [sys.executable, "-c", _INSPECT, str(model_dir)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        log.warning("vLLM's inspection of %s took over 600 s; servers will inspect it", model_dir)
        return False
    if done.returncode != 0:
        log.warning("vLLM could not inspect %s: %s", model_dir, done.stderr.strip()[-2000:])
        return False
    return True


@contextmanager
def shared_model_records(cache_root: Path, shared: Path | None) -> Iterator[None]:
    """Around vLLM's engine start, in the process that creates the engine (the records are read
    while its configuration is made): on entry copy into ``cache_root`` the records of the
    ``shared`` root that it lacks; on a clean exit (the engine started) copy to ``shared`` every
    record it lacks or holds different. Both sides are best effort: a directory that cannot be
    read or written costs the inspection and nothing else."""
    if shared is None:
        yield
        return
    records, shared_records = cache_root / RECORDS_FOLDER, shared / RECORDS_FOLDER
    _copy_records(shared_records, records, replace_different=False)
    yield
    _copy_records(records, shared_records, replace_different=True)


def _copy_records(source: Path, target: Path, replace_different: bool) -> None:
    """Copy ``source``'s ``*.json`` records that ``target`` lacks (or, with
    ``replace_different``, holds with other content)."""
    try:
        for record in sorted(source.glob("*.json")):
            content = record.read_bytes()
            existing = target / record.name
            if existing.exists() and (not replace_different or existing.read_bytes() == content):
                continue
            _write_atomically(existing, content)
    except OSError as exc:
        log.info("vLLM's model records not copied from %s to %s: %s", source, target, exc)


def _write_atomically(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` so that a server starting beside this one reads the old
    record or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = write_synced_temp(path.parent, path.name, lambda file: file.write(content))
    os.replace(temp, path)
