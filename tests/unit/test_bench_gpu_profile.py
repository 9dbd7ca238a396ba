"""The GPU profile summary of a trace, on a trace written by hand (no GPU needed)."""

from __future__ import annotations

import pytest

from load_tests.gpu_profile import WINDOW, summarize


def _event(name: str, cat: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur}


def test_busy_share_counts_overlapping_gpu_work_once_and_counts_host_calls() -> None:
    events = [
        _event(WINDOW, "user_annotation", 100, 1000),
        _event("gemm", "kernel", 200, 300),
        _event("copy", "gpu_memcpy", 400, 200),  # overlaps the gemm by 100
        _event("fill", "gpu_memset", 900, 100),
        *[_event("cudaLaunchKernel", "cuda_runtime", 150 + i, 1) for i in range(3)],
        _event("cuLaunchKernelEx", "cuda_runtime", 160, 1),
        _event("cudaStreamSynchronize", "cuda_runtime", 170, 5),
        _event("cudaMemcpyAsync", "cuda_runtime", 180, 1),
        {"ph": "i", "name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": 190},
    ]
    summary = summarize(events)
    assert summary["window_ms"] == pytest.approx(1.0)
    assert summary["gpu_busy_share"] == pytest.approx((400 + 100) / 1000)
    assert summary["gpu_copy_ms"] == pytest.approx(0.2)
    assert (summary["stream_syncs"], summary["kernel_launches"], summary["async_copies"]) == (
        1,
        4,
        1,
    )
