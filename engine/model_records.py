"""Share vLLM's records of model classes between data directories, so a fresh one starts faster.

Before it starts an engine, vLLM inspects the model's class (what it supports: pipeline
parallelism, pooling, multimodal input, ...) in a subprocess that imports vLLM: 11-13 s of a
35-50 s start on two cores. It skips that when its cache root (``VLLM_CACHE_ROOT``, here
``<data_dir>/vllm``) already holds a record of the class, so every server on a new data directory
(a test's, a new replica's, a user's second library) paid it again. A record depends only on
vLLM's own source file, whose hash it carries and vLLM checks when reading it: one made for one
data directory serves every other. Servers keep copies beside the models (`records_beside`) and
a new data directory starts with them; a stale copy only costs the inspection it would have cost
anyway, after which the fresh record replaces it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.kvstore.atomic import write_synced_temp

RECORDS_FOLDER = "modelinfos"
"""Where vLLM keeps them under its cache root (``vllm/model_executor/models/registry.py``)."""
log = logging.getLogger(__name__)


def records_beside(models_dir: Path) -> Path:
    """The shared copies of a machine's servers: a hidden folder among the converted models."""
    return models_dir / ".vllm-model-records"


@contextmanager
def shared_model_records(cache_root: Path, shared_dir: Path | None) -> Iterator[None]:
    """Around vLLM's engine start, in the process that creates the engine (the records are read
    while its configuration is made): on entry copy into ``cache_root`` the records of
    ``shared_dir`` it lacks; on a clean exit (the engine started) copy to ``shared_dir`` every
    record it lacks or holds different. Both sides are best effort: a directory that cannot be
    read or written costs the inspection and nothing else."""
    if shared_dir is None:
        yield
        return
    records = cache_root / RECORDS_FOLDER
    _copy_records(shared_dir, records, replace_different=False)
    yield
    _copy_records(records, shared_dir, replace_different=True)


def _copy_records(source: Path, target: Path, replace_different: bool) -> list[str]:
    """Copy ``source``'s ``*.json`` records that ``target`` lacks (or, with
    ``replace_different``, holds with other content); return the names copied."""
    copied: list[str] = []
    try:
        for record in sorted(source.glob("*.json")):
            content = record.read_bytes()
            existing = target / record.name
            if existing.exists() and (not replace_different or existing.read_bytes() == content):
                continue
            _write_atomically(existing, content)
            copied.append(record.name)
    except OSError as exc:
        log.info("vLLM's model records not copied from %s to %s: %s", source, target, exc)
    return copied


def _write_atomically(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` so that a server starting beside this one reads the old
    record or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = write_synced_temp(path.parent, path.name, lambda file: file.write(content))
    os.replace(temp, path)
