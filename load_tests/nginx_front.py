"""Debian's nginx on the host, configured as the replica stack's front, in front of given servers.

The benchmark of replicas (load_tests/bench_replicas.py) and the front's tests need the front of
docker/compose.scale.yaml without Docker: this takes docker/nginx.conf as it is, points its
upstream at the given `host:port` servers and its `listen` at a free loopback port, starts
`nginx` with a prefix folder of its own (pid, temp files, logs) and stops it when the block ends.
`scripts/install-services.sh` installs nginx where it is missing.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from load_tests.launch import free_port, launched, listening

CONFIG = Path(__file__).resolve().parents[1] / "docker" / "nginx.conf"
START_SECONDS = 10.0
UPSTREAM_SERVER = re.compile(r"^(\s*)server ragblend:8000( [^;]*)?;$", re.MULTILINE)
LISTEN = re.compile(r"^(\s*)listen 8000;$", re.MULTILINE)


class FrontUnavailable(RuntimeError):
    """nginx is missing, refused the configuration, or did not listen in time."""


def nginx_binary() -> str:
    """nginx on PATH, or Debian's in /usr/sbin (not on a plain user's PATH)."""
    binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if binary is None:
        raise FrontUnavailable("nginx is not installed: run `bash scripts/install-services.sh`")
    return binary


def front_config(upstreams: Sequence[str], port: int, template: str | None = None) -> str:
    """docker/nginx.conf with its one upstream server replaced by `upstreams` (each keeping the
    template's parameters) and its listen address by 127.0.0.1:`port`."""
    text = CONFIG.read_text(encoding="utf-8") if template is None else template
    match = UPSTREAM_SERVER.search(text)
    if match is None or not LISTEN.search(text):
        raise FrontUnavailable(f"{CONFIG} has no `server ragblend:8000` or `listen 8000` line")
    indent, parameters = match.group(1), match.group(2) or ""
    servers = "\n".join(f"{indent}server {address}{parameters};" for address in upstreams)
    text = UPSTREAM_SERVER.sub(lambda _: servers, text, count=1)
    return LISTEN.sub(lambda m: f"{m.group(1)}listen 127.0.0.1:{port};", text, count=1)


def check_config(config_path: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on a configuration, with `prefix` for its relative paths."""
    command = [nginx_binary(), "-t", "-p", f"{prefix}/", "-c", str(config_path), "-e", "stderr"]
    return subprocess.run(command, capture_output=True, text=True, check=False)


@contextmanager
def running_front(upstreams: Sequence[str], directory: Path) -> Iterator[str]:
    """nginx in front of `upstreams` with its files under `directory`; yields the front's URL."""
    port = free_port()
    (directory / "tmp").mkdir(parents=True, exist_ok=True)
    config_path = directory / "nginx.conf"
    config_path.write_text(front_config(upstreams, port), encoding="utf-8")
    checked = check_config(config_path, directory)
    if checked.returncode != 0:
        raise FrontUnavailable(f"nginx refused {config_path}: {checked.stderr}")
    command = [
        nginx_binary(), "-p", f"{directory}/", "-c", str(config_path), "-e", "stderr",
        "-g", "daemon off;",
    ]  # fmt: skip
    log_path = directory / "nginx.log"
    ready = partial(listening, port)
    # SIGTERM is nginx's fast shutdown: open streams are cut.
    with launched(command, log_path, ready, START_SECONDS, FrontUnavailable, signal.SIGTERM):
        yield f"http://127.0.0.1:{port}"
