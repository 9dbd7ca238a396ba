"""What a GPU did during one call, from a torch.profiler trace: busy share, waits, launches.

The blend's GPU costs were found in such traces (copies 39% of the GPU time, 612 stream syncs and
about 2,000 kernel launches in one 7B blend at 8K); ``bench_blend_maths --profile`` writes these
numbers per way of prefilling so that the next run shows where they went. Only torch is needed.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

DEVICE_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCHES = frozenset(
    {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"}
)
WINDOW = "profiled call"


def _union_us(spans: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of (start, end) spans."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def summarize(events: list[dict[str, Any]]) -> dict[str, float]:
    """Chrome-trace ``events`` of one profiled call (marked by a ``WINDOW`` annotation) summed:
    the window's length, the share of it the GPU was busy (kernels, copies, fills; overlaps
    counted once), the GPU time in copies, and the counts of stream syncs, kernel launches and
    async copies the host issued."""
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    windows = [
        e for e in complete if e.get("name") == WINDOW and e.get("cat") != "gpu_user_annotation"
    ]
    if windows:
        begin = float(windows[0]["ts"])
        end = begin + float(windows[0]["dur"])
    else:
        begin = min((float(e["ts"]) for e in complete), default=0.0)
        end = max((float(e["ts"]) + float(e["dur"]) for e in complete), default=0.0)
    device = [e for e in complete if e.get("cat") in DEVICE_WORK]
    busy = _union_us((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in device)
    copies = sum(float(e["dur"]) for e in device if e.get("cat") == "gpu_memcpy")
    names = [str(e.get("name")) for e in complete if e.get("cat") == "cuda_runtime"]
    window_us = max(end - begin, 1e-9)
    return {
        "window_ms": window_us / 1000,
        "gpu_busy_share": busy / window_us,
        "gpu_copy_ms": copies / 1000,
        "stream_syncs": names.count("cudaStreamSynchronize"),
        "kernel_launches": sum(name in LAUNCHES for name in names),
        "async_copies": names.count("cudaMemcpyAsync"),
    }


def profile_call(run: Callable[[], Any], trace: Path | None = None) -> dict[str, float]:
    """``summarize`` of one call of ``run`` on the current GPU (synchronized before and inside
    the window, so the window holds all its GPU work); the trace is kept at ``trace``."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities) as profiler, record_function(WINDOW):
        run()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as scratch:
        path = trace or Path(scratch) / "trace.json"
        profiler.export_chrome_trace(str(path))
        document = json.loads(path.read_text())
    events = document["traceEvents"] if isinstance(document, dict) else document
    return summarize(events)
