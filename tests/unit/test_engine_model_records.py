"""vLLM's records of model classes travel between a server's cache root and the shared copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.model_records import RECORDS_FOLDER, shared_model_records, shared_root

LLAMA = "vllm-model_executor-models-llama-LlamaForCausalLM.json"
QWEN = "vllm-model_executor-models-qwen2-Qwen2ForCausalLM.json"


def _record(module_hash: str) -> str:
    return json.dumps({"hash": module_hash, "modelinfo": {"architecture": "LlamaForCausalLM"}})


def _shared_llama(tmp_path: Path, module_hash: str) -> Path:
    """A shared root beside ``tmp_path``'s models holding a Llama record of ``module_hash``."""
    shared = shared_root(tmp_path / "models")
    (shared / RECORDS_FOLDER).mkdir(parents=True)
    (shared / RECORDS_FOLDER / LLAMA).write_text(_record(module_hash))
    return shared


def _files(folder: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(folder.iterdir())}


def test_a_fresh_cache_root_starts_with_the_shared_records(tmp_path: Path) -> None:
    shared = _shared_llama(tmp_path, "a")
    cache_root = tmp_path / "data" / "vllm"
    with shared_model_records(cache_root, shared):
        assert _files(cache_root / RECORDS_FOLDER) == {LLAMA: _record("a")}


def test_a_record_the_engine_made_is_shared_once_it_has_started(tmp_path: Path) -> None:
    shared = shared_root(tmp_path / "models")
    cache_root = tmp_path / "data" / "vllm"
    with shared_model_records(cache_root, shared):
        (cache_root / RECORDS_FOLDER).mkdir(parents=True)
        (cache_root / RECORDS_FOLDER / QWEN).write_text(_record("q"))
    assert _files(shared / RECORDS_FOLDER) == {QWEN: _record("q")}


def test_a_record_vllm_made_again_replaces_the_stale_shared_one(tmp_path: Path) -> None:
    shared = _shared_llama(tmp_path, "old")
    cache_root = tmp_path / "vllm"
    with shared_model_records(cache_root, shared):
        # vLLM finds the copied hash stale, inspects the class and rewrites its record.
        (cache_root / RECORDS_FOLDER / LLAMA).write_text(_record("new"))
    assert _files(shared / RECORDS_FOLDER) == {LLAMA: _record("new")}


def test_a_cache_roots_own_record_is_kept_on_entry(tmp_path: Path) -> None:
    shared = _shared_llama(tmp_path, "shared")
    records = tmp_path / "vllm" / RECORDS_FOLDER
    records.mkdir(parents=True)
    (records / LLAMA).write_text(_record("own"))
    with shared_model_records(tmp_path / "vllm", shared):
        assert _files(records) == {LLAMA: _record("own")}


def test_an_engine_that_failed_to_start_shares_nothing(tmp_path: Path) -> None:
    shared = shared_root(tmp_path / "models")
    cache_root = tmp_path / "vllm"
    with pytest.raises(RuntimeError), shared_model_records(cache_root, shared):
        (cache_root / RECORDS_FOLDER).mkdir(parents=True)
        (cache_root / RECORDS_FOLDER / LLAMA).write_text(_record("half"))
        raise RuntimeError("the engine core died")
    assert not shared.exists()


def test_a_shared_place_that_cannot_be_written_costs_nothing_but_the_copy(tmp_path: Path) -> None:
    blocked = tmp_path / "models"
    blocked.write_text("a file where the models folder should be")
    cache_root = tmp_path / "vllm"
    with shared_model_records(cache_root, shared_root(blocked)):
        (cache_root / RECORDS_FOLDER).mkdir(parents=True)
        (cache_root / RECORDS_FOLDER / LLAMA).write_text(_record("a"))
    assert _files(cache_root / RECORDS_FOLDER) == {LLAMA: _record("a")}


def test_without_a_shared_place_the_cache_root_is_left_alone(tmp_path: Path) -> None:
    with shared_model_records(tmp_path / "vllm", None):
        pass
    assert not (tmp_path / "vllm").exists()
