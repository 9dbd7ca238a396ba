"""The PostgreSQL image's entrypoint (docker/postgres-entrypoint.sh) run on the host with Debian's
PostgreSQL 15, as the image runs it: the first start makes a cluster whose `ragblend` role and
database take the password from RAGBLEND_POSTGRES_PASSWORD over TCP; a restart keeps the data.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

ENTRYPOINT = Path(__file__).resolve().parents[2] / "docker" / "postgres-entrypoint.sh"
BINARIES = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "0123456789abcdef"
START_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_postgres(folder: Path) -> list[str]:
    """PostgreSQL refuses root: as root, run as Debian's `postgres` user, owning `folder`."""
    if os.geteuid() != 0:
        return []
    shutil.chown(folder, "postgres", "postgres")
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder the `postgres` user can reach (pytest's own are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ragblend-pg-image-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def url(port: int, password: str) -> str:
    return f"postgresql://ragblend:{password}@127.0.0.1:{port}/ragblend"


@contextmanager
def entrypoint(folder: Path, port: int, **environment: str) -> Iterator[subprocess.Popen[bytes]]:
    """The entrypoint on `port`, its cluster under `folder`, its output in `folder`/log."""
    if not (BINARIES / "postgres").exists():
        pytest.fail("PostgreSQL 15 is not installed: run `bash scripts/install-services.sh`")
    env = {"PATH": f"{BINARIES}:/usr/bin:/bin", "PGDATA": str(folder / "data"), **environment}
    command = [*as_postgres(folder), "sh", str(ENTRYPOINT), "-p", str(port)]
    with (folder / "log").open("ab") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def connect_when_up(process: subprocess.Popen[bytes], port: int, log: Path) -> psycopg.Connection:
    deadline = time.monotonic() + START_SECONDS
    while True:
        assert process.poll() is None, log.read_text()
        try:
            return psycopg.connect(url(port, PASSWORD), autocommit=True, connect_timeout=2)
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "postgres did not take connections in time"
            time.sleep(0.2)


def test_first_start_makes_a_password_protected_ragblend_database_that_a_restart_keeps(
    folder: Path,
) -> None:
    port, log = free_port(), folder / "log"
    with entrypoint(folder, port, RAGBLEND_POSTGRES_PASSWORD=PASSWORD) as server:
        with connect_when_up(server, port, log) as connection:
            connection.execute("CREATE TABLE kept (note text)")
            connection.execute("INSERT INTO kept VALUES ('written before the restart')")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(url(port, "wrong"), connect_timeout=5)
    # A restart finds the cluster and needs no password setting any more.
    with entrypoint(folder, port) as server, connect_when_up(server, port, log) as connection:
        notes = connection.execute("SELECT note FROM kept").fetchall()
    assert notes == [("written before the restart",)]


def test_first_start_without_a_password_refuses_and_says_which_setting(folder: Path) -> None:
    with entrypoint(folder, free_port()) as server:
        server.wait(timeout=30)
    assert server.returncode == 64
    assert "RAGBLEND_POSTGRES_PASSWORD" in (folder / "log").read_text()
    assert not (folder / "data" / "PG_VERSION").exists()
