"""A real PostgreSQL server in a throwaway cluster on a free loopback port, for benchmarks of
replicas sharing a library (`bench_replicas.py`) and tests of the shared document library.

It lives in load_tests, not tests, because the benchmarks run outside pytest and the installed
package has no `tests`; the tests import it from here.

`running_postgres()` runs `initdb` into a fresh temporary folder, starts `postgres` on
127.0.0.1:`port` (fsync off: nothing here must survive a power cut, but every commit is written
before it is acknowledged, so it survives `kill()`) and creates the database
`ragblend`; `url` is what `RAGBLEND_DATABASE_URL` takes. Tests `stop()` (clean shutdown) or
`kill()` (immediate shutdown, as a crash) the server to simulate an outage and `start()` it again on
the same port and cluster, with its data. PostgreSQL refuses to run as root, so as root the
cluster belongs to the `postgres` system user (created if missing) and every server binary runs
under it. `scripts/install-services.sh` installs Debian's PostgreSQL where it is missing.

    with running_postgres() as server:
        library = Library(..., database_url=server.url)
        server.stop(); ...; server.start()
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from load_tests.launch import free_port

START_SECONDS = 30.0
STOP_SECONDS = 30.0
DATABASE = "ragblend"
USER = "ragblend"
"""The cluster's superuser; connections from loopback are trusted (no password)."""
SYSTEM_USER = "postgres"
"""Who runs the server when the tests run as root."""


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is missing, exited, or did not take connections in time."""


def _binaries() -> Path:
    """Debian's versioned folder of server binaries, newest first; or where `initdb` is on PATH."""
    for version_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (version_dir / "initdb").exists():
            return version_dir
    on_path = shutil.which("initdb")
    if on_path is None:
        install = "run `bash scripts/install-services.sh`"
        raise PostgresUnavailable(f"PostgreSQL is not installed: {install}")
    return Path(on_path).parent


def _run_as() -> list[str]:
    """A command prefix that drops root to the system user (none needed when not root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True)
    return ["setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups"]


class PostgresServer:
    """One `postgres` process on 127.0.0.1:`port` over a cluster in its own temporary folder."""

    def __init__(self) -> None:
        self.bin = _binaries()
        self.prefix = _run_as()
        self.directory = Path(tempfile.mkdtemp(prefix="ragblend-pg-"))
        if self.prefix:
            shutil.chown(self.directory, SYSTEM_USER, SYSTEM_USER)
        self.cluster = self.directory / "cluster"
        self.log_path = self.directory / "postgres.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _command(self, binary: str, *arguments: str) -> list[str]:
        return [*self.prefix, str(self.bin / binary), *arguments]

    def start(self) -> None:
        """Start the server (again, on the same port and data) and wait until it takes queries;
        the first start creates the cluster and the database."""
        first = not self.cluster.exists()
        if first:
            subprocess.run(
                self._command(
                    "initdb", "-D", str(self.cluster), "-U", USER, "--auth=trust",
                    "--no-locale", "-E", "UTF8", "--no-sync",
                ),
                check=True, capture_output=True, cwd=self.directory,
            )  # fmt: skip
        command = self._command(
            "postgres", "-D", str(self.cluster), "-k", str(self.directory),
            "-p", str(self.port), "-h", "127.0.0.1",
            "-c", "fsync=off", "-c", "full_page_writes=off",
        )  # fmt: skip
        with self.log_path.open("ab") as log:
            # cwd: the system user may not be allowed into the folder the tests run from
            self.process = subprocess.Popen(command, stdout=log, stderr=log, cwd=self.directory)
        self._wait_ready("postgres")
        if first:
            with psycopg.connect(self._url_of("postgres"), autocommit=True) as connection:
                connection.execute(f"CREATE DATABASE {DATABASE}")

    def stop(self) -> None:
        """Shut down cleanly (SIGINT, PostgreSQL's fast shutdown: clients are disconnected)."""
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        """Shut down at once (SIGQUIT, immediate shutdown), as a crash would; the next start
        recovers from the write-ahead log."""
        self._signal(signal.SIGQUIT)

    def remove(self) -> None:
        """Stop the server and delete its cluster."""
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def connect(self) -> psycopg.Connection:
        """A plain autocommit connection, for tests that inspect what the library stored."""
        return psycopg.connect(self.url, autocommit=True)

    def _url_of(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def _signal(self, signum: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=STOP_SECONDS)
        self.process = None

    def _wait_ready(self, database: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise PostgresUnavailable(f"postgres exited: {self.log_path.read_text()}")
            try:
                psycopg.connect(self._url_of(database), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise PostgresUnavailable(f"postgres did not take connections within {START_SECONDS} s")


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A started `PostgresServer` with an empty `ragblend` database, removed when the block ends."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()
