"""One data directory, one server: the second is refused with who holds it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.http.data_dir_lock import DataDirInUse, DataDirLock

HOLD = """
import sys, time
from pathlib import Path
from gateway.http.data_dir_lock import DataDirLock
lock = DataDirLock(Path(sys.argv[1]))
lock.acquire(8123)
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_server_is_refused_with_the_holders_pid_and_port(tmp_path: Path) -> None:
    with DataDirLock(tmp_path) as first:
        first.acquire(8000)
        with pytest.raises(DataDirInUse, match=r"pid \d+, port 8000") as refused:
            DataDirLock(tmp_path).acquire(9000)
        assert "RAGBLEND_DATA_DIR" in str(refused.value)
    DataDirLock(tmp_path).acquire(9000)  # released: the next server may start


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DataDirInUse, match=f"pid {holder.pid}, port 8123"):
            DataDirLock(tmp_path).acquire(9000)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = DataDirLock(tmp_path)
    for _ in range(50):  # the kernel drops the lock as the process is reaped
        try:
            lock.acquire(9000)
            break
        except DataDirInUse:
            time.sleep(0.1)
    else:
        pytest.fail("the lock outlived its holder")
    lock.release()
