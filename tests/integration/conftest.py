"""Real gateways with the real engine on SmolLM2, each started once for the whole session: one
server alone, and a pair of replicas on one PostgreSQL library and one Redis chunk-KV tier."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.platform import SETTINGS_VARIABLES
from tests.integration.launch_ahead import LaunchAhead

REPO = Path(__file__).resolve().parents[2]
TEST_MODEL = "smollm2-135m-instruct"
API_KEY = "test-key"
PROJECT_KEYS = {
    "alpha": "key-a",
    "beta": "key-b",
    "gamma": "key-g",
    "delta": "key-d",
    "epsilon": "key-e",
    "zeta": "key-z",
}
"""Keys of the projects every server also serves (`test_projects.py`, the replica pairs); gamma
and delta share chunk KV with each other and with the default project."""
API_KEYS = ",".join(["other-key", API_KEY, *(f"{k}:{p}" for p, k in PROJECT_KEYS.items())])
"""Every server's keys: two of the ``default`` project's and one per project above."""
MAX_CONCURRENT = 8
MAX_MODEL_LEN = 2048
MAX_DOCUMENT_BYTES = 100_000
STARTUP_SECONDS = 600


@dataclass(frozen=True)
class Server:
    url: str
    model: str
    api_key: str
    log: Path
    models_dir: Path
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        # Generous: on a busy 2-core machine eight concurrent ratio-1.0 blends take ~100 s.
        return httpx.Client(base_url=self.url, headers=headers, timeout=300)


def as_project(server: Server, project: str) -> Server:
    """`server` reached with `project`'s key (`PROJECT_KEYS`; the server must hold it)."""
    return replace(server, api_key=PROJECT_KEYS[project])


def settled_count(server: Server, outcome: str) -> float:
    """The server's ``ragblend_settled_chunks_total`` of one outcome (0 before any)."""
    text = httpx.get(f"{server.url}/metrics").text
    match = re.search(rf'^ragblend_settled_chunks_total{{outcome="{outcome}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def wait_until_settled(server: Server, wait_s: float = 120) -> None:
    """Until the server has recomputed behind the fixed prefix every chunk a first sighting
    stored in its own context (`gateway/rag/settle.py`), which rewrites those entries."""
    deadline = time.monotonic() + wait_s
    while settled_count(server, "queued") > settled_count(server, "done"):
        assert settled_count(server, "failed") == 0, "settling failed: see the server log"
        assert time.monotonic() < deadline, "the first sightings' chunks never settled"
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(server: Server) -> None:
    assert server.process is not None
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            code = server.process.returncode
            pytest.fail(f"server exited with {code}:\n{_log_excerpt(server.log)}")
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    pytest.fail(f"server not ready after {STARTUP_SECONDS}s:\n{_log_excerpt(server.log)}")


def _log_excerpt(log: Path) -> str:
    """The log's error lines, then its tail: a failed start's root cause is usually logged long
    before the shutdown tracebacks that end the log."""
    text = log.read_text(errors="replace")
    errors = [line for line in text.splitlines() if "ERROR" in line or "Error:" in line]
    return "error lines:\n" + "\n".join(errors[:30])[-4000:] + "\n--- log tail:\n" + text[-3000:]


def engine_core_pids(pid: int) -> list[int]:
    """The engine core processes the server `pid` started."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    # The kernel keeps 15 characters of a process name: "VLLM::EngineCor".
    return [child for child in children if "EngineCor" in Path(f"/proc/{child}/comm").read_text()]


def _launch(data_dir: Path, extra_env: dict[str, str] | None) -> Server:
    """``ragblend serve`` started in a subprocess on SmolLM2 with ``data_dir``, not yet ready."""
    models_dir = Path(os.environ.get("RAGBLEND_MODELS_DIR", REPO / "data" / "models"))
    log = data_dir / "server.log"
    port = _free_port()
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env = {
        **inherited,
        "RAGBLEND_MODEL": TEST_MODEL,
        "RAGBLEND_DATA_DIR": str(data_dir),
        "RAGBLEND_MODELS_DIR": str(models_dir),
        "RAGBLEND_API_KEYS": API_KEYS,
        "RAGBLEND_SHARED_KV_PROJECTS": "default,gamma,delta",
        "RAGBLEND_MAX_CONCURRENT_REQUESTS": str(MAX_CONCURRENT),
        "RAGBLEND_MAX_MODEL_LEN": str(MAX_MODEL_LEN),
        "RAGBLEND_KV_CACHE_GIB": "1",
        "RAGBLEND_LOG_LEVEL": "warning",
        "RAGBLEND_MAX_DOCUMENT_BYTES": str(MAX_DOCUMENT_BYTES),
        # Too small to hold any chunk: every cached chunk is read back from the disk tier.
        "RAGBLEND_CHUNK_CACHE_MEMORY_GIB": "0.0001",
        # A stop drains kept-alive connections for half of this (4 s at the default 8 s) before
        # the engine stops; the drain is tested in test_server_lives.py and
        # test_gateway_shutdown.py.
        "RAGBLEND_SHUTDOWN_TIMEOUT": "2",
        **(extra_env or {}),
    }
    command = [sys.executable, "-m", "gateway.cli.main", "serve", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    return Server(url, TEST_MODEL, API_KEY, log, models_dir, data_dir, process)


def _stop(servers: list[Server]) -> None:
    """SIGINT to every server at once, then each given a minute to exit."""
    processes = [server.process for server in servers if server.process is not None]
    for process in processes:
        process.send_signal(signal.SIGINT)
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def launched_servers(*setups: tuple[Path, dict[str, str] | None]) -> Iterator[list[Server]]:
    """One server per ``(data_dir, extra_env)`` started, not yet ready, until the block ends."""
    servers: list[Server] = []
    try:
        for data_dir, extra_env in setups:
            servers.append(_launch(data_dir, extra_env))
        yield servers
    finally:
        _stop(servers)


@contextmanager
def running_servers(
    *setups: tuple[Path, dict[str, str] | None],
) -> Iterator[list[Server]]:
    """One server per ``(data_dir, extra_env)`` until the block ends, all started at once: a
    start is mostly one core's work of imports, so on 2 cores two take little longer than one."""
    with launched_servers(*setups) as servers:
        for server in servers:
            _wait_ready(server)
        yield servers


@contextmanager
def running_server(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """``ragblend serve`` in a subprocess on SmolLM2 with ``data_dir``, until the block ends;
    ``extra_env`` adds or overrides settings."""
    with running_servers((data_dir, extra_env)) as (server,):
        yield server


@pytest.fixture(scope="module")
def own_server(launch_ahead: LaunchAhead[Server], request: Any) -> Iterator[Server]:
    """The module's own server (its ``OWN_SERVER`` settings; `launch_ahead.py`), ready, until the
    module ends."""
    started = launch_ahead.take(request.module)
    try:
        _wait_ready(started)
        yield started
    finally:
        _stop([started])


@pytest.fixture(scope="session")
def launch_ahead(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LaunchAhead[Server]]:
    modules = [item.module for item in request.session.items if hasattr(item, "module")]
    ahead = LaunchAhead(lambda name, env: _launch(tmp_path_factory.mktemp(name), env), modules)
    yield ahead
    _stop(ahead.leftovers())


SESSION_SERVERS_AHEAD = {"replicas": "launched_replicas"}
"""Session servers started while the module before the first that uses them runs: the fixture
its tests ask for, and the fixture that starts its servers without waiting for them."""


@pytest.fixture(scope="module", autouse=True)
def next_module_server_starts(launch_ahead: LaunchAhead[Server], request: Any) -> None:
    launch_ahead.module_starts(request.module)
    following = launch_ahead.following(request.module)
    asked = {
        name
        for item in request.session.items
        if getattr(item, "module", None) is following
        for name in item.fixturenames
    }
    for fixture, launcher in SESSION_SERVERS_AHEAD.items():
        if fixture in asked:
            request.getfixturevalue(launcher)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("data")) as started:
        yield started


@pytest.fixture(scope="session")
def tokenizer(server: Server) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(server.models_dir / server.model)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    from load_tests.postgres_launcher import running_postgres

    with running_postgres() as started:
        yield started


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.redis_server import running_redis

    with running_redis(tmp_path_factory.mktemp("redis"), maxmemory="512mb") as started:
        yield started


@pytest.fixture(scope="session")
def launched_replicas(
    tmp_path_factory: pytest.TempPathFactory, postgres: Any, redis_server: Any
) -> Iterator[list[Server]]:
    """Servers A and B (`replicas`) started, not yet ready."""
    shared = {
        "RAGBLEND_CHUNK_CACHE_RECOMPUTE_WHEN_FASTER": "false",
        "RAGBLEND_DATABASE_URL": postgres.url,
        "RAGBLEND_CHUNK_CONTEXT": "passages",
        "RAGBLEND_CHUNK_CACHE_REDIS_URL": redis_server.url,
        "RAGBLEND_CHUNK_CACHE_SECRET": secrets.token_hex(32),
    }
    setups = [(tmp_path_factory.mktemp(name), shared) for name in ("a", "b")]
    with launched_servers(*setups) as servers:
        yield servers


@pytest.fixture(scope="session")
def replicas(launched_replicas: list[Server]) -> tuple[Server, Server]:
    """Servers A and B: separate data dirs (neither sees the other's disk tier), one library in
    PostgreSQL, one Redis tier and its secret (`test_shared_library.py`, `test_redis_tier.py`).
    Library chunks are precomputed behind the fixed prefix: a neighbour context's refreshes would
    be precomputes too, and the library tests count new chunks'. A Redis hit is always loaded:
    these tests are about what Redis shares, and on a busy machine a chunk of this small model
    can measure quicker to compute than to load (`CHUNK_CACHE_RECOMPUTE_WHEN_FASTER`)."""
    for replica in launched_replicas:
        _wait_ready(replica)
    first, second = launched_replicas
    return first, second
