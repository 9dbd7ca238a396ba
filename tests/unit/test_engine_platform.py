"""The environment vLLM starts with: CPU ranks of a split model share the cores unbound; the
dtype ``auto`` picks is bf16 only where the CPU multiplies it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import platform
from engine.platform import SETTINGS_VARIABLES, prepare_environment, resolve_dtype

SET_BY_PREPARE = SETTINGS_VARIABLES


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


def test_cores_are_left_to_the_scheduler_only_when_told(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prepare_environment("cpu", tmp_path, 1.0, "info")
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ  # vLLM's own rule
    prepare_environment("cpu", tmp_path, 1.0, "info", reserved_cores=1)
    assert os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "2"  # the user's own value wins
    prepare_environment("cpu", tmp_path, 1.0, "info", reserved_cores=0)
    assert os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "2"


def test_the_users_own_thread_settings_win(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    os.environ.update(VLLM_CPU_OMP_THREADS_BIND="0|1", OMP_NUM_THREADS="3")
    prepare_environment("cpu", tmp_path, 1.0, "info", tensor_parallel_size=64)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert os.environ["OMP_NUM_THREADS"] == "3"


def test_an_inherited_kv_cache_size_wins_and_is_named_in_a_warning(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "4"
    prepare_environment("cpu", tmp_path, 1.0, "info")
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert "VLLM_CPU_KVCACHE_SPACE=4 in the environment overrides RAGBLEND_KV_CACHE_GIB=1" in (
        caplog.text
    )


def test_every_variable_derived_from_settings_is_listed_for_launchers(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = dict(os.environ)
    prepare_environment(
        "cpu", tmp_path, 1.0, "info", tensor_parallel_size=64, reserved_cores=1, cpu_compile=True
    )
    derived = {name for name, value in os.environ.items() if before.get(name) != value}
    constant = {"VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "HF_HUB_OFFLINE"}
    constant |= {"TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM"}
    assert derived - constant == set(SETTINGS_VARIABLES)


def test_a_compiled_cpu_model_keeps_its_compiled_code_with_the_servers_data(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prepare_environment("cpu", tmp_path, 1.0, "info")
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # eager: nothing compiled to keep
    assert "VLLM_USE_AOT_COMPILE" not in os.environ
    prepare_environment("cpu", tmp_path, 1.0, "info", cpu_compile=True)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path.resolve() / "inductor")
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "0"  # vLLM 0.32 cannot load its CPU artifact


def test_torchs_own_default_compile_cache_is_not_taken_for_the_users(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    cache_dir()  # what importing vLLM does: fills in torch's default under /tmp
    prepare_environment("cpu", tmp_path, 1.0, "info", cpu_compile=True)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path.resolve() / "inductor")


def test_the_users_own_compile_cache_wins(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    os.environ.update(TORCHINDUCTOR_CACHE_DIR="/elsewhere", VLLM_USE_AOT_COMPILE="1")
    prepare_environment("cpu", tmp_path, 1.0, "info", cpu_compile=True)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/elsewhere"
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "1"


AVX2_EPYC = (
    "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n"
)
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"
NEOVERSE_V2 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.parametrize(
    ("cpuinfo", "chosen"),
    [
        (AVX2_EPYC, "float32"),
        (SAPPHIRE_RAPIDS, "bfloat16"),
        (NEOVERSE_V2, "bfloat16"),
        ("", "float32"),
    ],
)
def test_auto_takes_bf16_only_on_cpus_that_multiply_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpuinfo: str, chosen: str
) -> None:
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    monkeypatch.setattr(platform, "CPUINFO", tmp_path / "cpuinfo")
    assert resolve_dtype("auto", "cpu") == chosen
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"  # an explicit dtype always wins


def test_auto_reads_float32_when_the_cpu_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(platform, "CPUINFO", tmp_path / "missing")
    assert resolve_dtype("auto", "cpu") == "float32"
