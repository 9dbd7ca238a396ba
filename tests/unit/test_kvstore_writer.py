"""The backing tiers' writer threads give way to the engine's compute threads."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from engine.kvstore.memory import MemoryTier
from engine.kvstore.writer import TierWriter


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread priorities are Linux's")
def test_a_tier_writer_runs_at_the_lowest_priority_and_the_caller_keeps_its_own() -> None:
    seen: list[int] = []

    def write(_key: object, _entry: object, _replace: bool) -> None:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    writer = TierWriter(MemoryTier(1 << 20, name="disk"), 4, write)
    assert writer.offer("key", "entry")  # type: ignore[arg-type]
    writer.stop()
    assert seen == [19]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == caller
