"""The server's start-up heap: nothing collected while loading, frozen after, and garbage that
serving makes collected again (run in a subprocess: the collector's state is process-wide)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import gc
import weakref
from gateway.http.startup_heap import freeze_loaded_heap, pause_collection

class Node:
    pass

def garbage_cycle():
    node = Node()
    node.self = node
    return weakref.ref(node)

def cycles(count):
    for _ in range(count):
        garbage_cycle()

pause_collection()
made_while_loading = garbage_cycle()
cycles(50_000)  # far past the collector's thresholds
assert made_while_loading() is not None, "collected while loading"
freeze_loaded_heap()
assert made_while_loading() is None, "loading's garbage outlived the freeze"
assert gc.isenabled() and gc.get_freeze_count() > 0
made_while_serving = garbage_cycle()
cycles(10_000)  # the collector runs on its own again
assert made_while_serving() is None, "garbage made after loading is not collected"
print("ok")
"""


def test_loading_collects_nothing_then_the_heap_is_frozen_and_serving_collects() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
