"""The environment vLLM starts with: CPU ranks of a split model share the cores unbound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.platform import prepare_environment

SET_BY_PREPARE = ("VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS", "VLLM_CPU_KVCACHE_SPACE")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A copy of the environment for the test to change: nothing leaks into other tests."""
    copy = {name: value for name, value in os.environ.items() if name not in SET_BY_PREPARE}
    monkeypatch.setattr(os, "environ", copy)
    return monkeypatch


def test_more_cpu_ranks_than_numa_nodes_run_unbound_with_a_share_of_the_cores(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cores = len(os.sched_getaffinity(0))
    prepare_environment("cpu", tmp_path, 1.0, "info", tensor_parallel_size=64)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert os.environ["OMP_NUM_THREADS"] == str(max(1, cores // 64))


def test_an_unsplit_model_keeps_vllms_own_binding(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prepare_environment("cpu", tmp_path, 1.0, "info")
    assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ
    assert "OMP_NUM_THREADS" not in os.environ
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_the_users_own_thread_settings_win(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    os.environ.update(VLLM_CPU_OMP_THREADS_BIND="0|1", OMP_NUM_THREADS="3")
    prepare_environment("cpu", tmp_path, 1.0, "info", tensor_parallel_size=64)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert os.environ["OMP_NUM_THREADS"] == "3"
