"""`ragblend serve` subprocesses on free loopback ports, for benchmarks of several replicas.

Benchmarks run outside pytest, so they cannot use the integration tests' fixtures; this starts
servers side by side (so their engines load at the same time), waits until every one answers
/health, reads their Prometheus counters, and stops them (SIGINT, then SIGKILL) when the block
ends. Each server gets a data dir of its own under the given folder.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engine.platform import SETTINGS_VARIABLES
from load_tests.launch import free_port

REPO = Path(__file__).resolve().parents[1]
READY_SECONDS = 900.0


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and ``--models-dir``: what a benchmark's server serves, from where."""
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--models-dir", default="data/models")


def bench_environment(args: argparse.Namespace, **settings: str) -> dict[str, str]:
    """A benchmark server's settings: ``args.model`` served as "bench", quiet logs, and
    ``settings`` (``RAGBLEND_`` variables)."""
    return {
        "RAGBLEND_MODEL": args.model,
        "RAGBLEND_SERVED_MODEL_NAME": "bench",
        "RAGBLEND_MODELS_DIR": str(Path(args.models_dir).resolve()),
        "RAGBLEND_LOG_LEVEL": "warning",
        **settings,
    }


class ReplicaFailed(RuntimeError):
    """A server exited or did not become ready in time."""


@dataclass(frozen=True)
class Replica:
    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def counter(self, family: str, **labels: str) -> float:
        """The sum of a counter's samples whose labels include `labels` (0 when absent)."""
        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        return sum(
            sample.value
            for metric in text_string_to_metric_families(text)
            if metric.name == family
            for sample in metric.samples
            if sample.name == f"{family}_total"
            and all(sample.labels.get(key) == value for key, value in labels.items())
        )


def _start(name: str, data_dir: Path, environment: Mapping[str, str]) -> Replica:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = data_dir / "server.log"
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env = {**inherited, **environment, "RAGBLEND_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "gateway.cli.main", "serve", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink)
    return Replica(name, port, log, process)


def _wait_ready(replica: Replica, deadline: float) -> None:
    while time.monotonic() < deadline:
        if replica.process.poll() is not None:
            tail = replica.log.read_text(errors="replace")[-3000:]
            raise ReplicaFailed(f"{replica.name} exited with {replica.process.returncode}:\n{tail}")
        try:
            if httpx.get(f"{replica.url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise ReplicaFailed(f"{replica.name} not ready after {READY_SECONDS:.0f} s (see {replica.log})")


def _stop(replica: Replica) -> None:
    if replica.process.poll() is None:
        replica.process.send_signal(signal.SIGINT)
    try:
        replica.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        replica.process.kill()
        replica.process.wait(timeout=30)


@contextmanager
def running_replicas(
    names: Sequence[str], folder: Path, environment: Mapping[str, str]
) -> Iterator[list[Replica]]:
    """One ready server per name, data dirs `folder`/<name>, all with `environment`."""
    replicas: list[Replica] = []
    try:
        for name in names:
            replicas.append(_start(name, folder / name, environment))
        deadline = time.monotonic() + READY_SECONDS
        for replica in replicas:
            _wait_ready(replica, deadline)
        yield replicas
    finally:
        for replica in replicas:
            _stop(replica)


@contextmanager
def one_server_client(
    name: str, environment: Mapping[str, str], api_key: str, timeout_s: float = 900
) -> Iterator[httpx.Client]:
    """A client of one ready server with `environment` (data dir in a temporary folder), with
    `api_key` as its bearer token; the server stops when the block ends."""
    headers = {"Authorization": f"Bearer {api_key}"}
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as folder,
        running_replicas([name], Path(folder), environment) as (replica,),
        httpx.Client(base_url=replica.url, headers=headers, timeout=timeout_s) as client,
    ):
        yield client
