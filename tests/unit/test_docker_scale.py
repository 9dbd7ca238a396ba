"""The replica stack (docker/compose.scale.yaml) checked without Docker's engine: its wiring, the
PostgreSQL image's entrypoint run for real, and the nginx front run for real (Debian's nginx with
docker/nginx.conf) in front of two small HTTP servers standing in for replicas.

`scripts/docker-test.sh` runs the whole stack with real replicas when a Docker engine can start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from load_tests.nginx_front import check_config, front_config

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
SECRETS = {"RAGBLEND_CHUNK_CACHE_SECRET": "ab" * 32, "RAGBLEND_POSTGRES_PASSWORD": "cd" * 8}


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.scale.yaml").read_text(encoding="utf-8"))


def compose_config(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker") is None:
        pytest.skip("no docker client to resolve the compose file with")
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode != 0:  # older clients say so in other words than newer ones
        pytest.skip("the docker client has no compose plugin")
    command = ["docker", "compose", "-f", str(DOCKER / "compose.scale.yaml"), "config"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGBLEND_")}
    result = subprocess.run(
        command, env={**clean, **environment}, capture_output=True, text=True, check=False
    )
    return result


def test_compose_resolves_two_replicas_on_shared_postgres_and_redis_behind_nginx() -> None:
    result = compose_config(SECRETS)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert set(services) == {"ragblend", "postgres", "redis", "nginx"}
    replicas = services["ragblend"]
    assert replicas["deploy"]["replicas"] == 2
    environment = replicas["environment"]
    password = SECRETS["RAGBLEND_POSTGRES_PASSWORD"]
    assert environment["RAGBLEND_DATABASE_URL"] == (
        f"postgresql://ragblend:{password}@postgres:5432/ragblend"
    )
    assert environment["RAGBLEND_CHUNK_CACHE_REDIS_URL"] == "redis://redis:6379/0"
    assert environment["RAGBLEND_CHUNK_CACHE_SECRET"] == SECRETS["RAGBLEND_CHUNK_CACHE_SECRET"]
    assert services["postgres"]["environment"]["RAGBLEND_POSTGRES_PASSWORD"] == password
    published = [(p["host_ip"], p["published"], p["target"]) for p in services["nginx"]["ports"]]
    assert published == [("127.0.0.1", "8000", 8000)]
    assert "ports" not in replicas, "replicas are reached through nginx only"


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_each_shared_secret(missing: str) -> None:
    result = compose_config({k: v for k, v in SECRETS.items() if k != missing})
    assert result.returncode != 0
    assert missing in result.stderr


def test_every_replica_gets_a_data_dir_of_its_own(stack: dict[str, Any]) -> None:
    volumes = stack["services"]["ragblend"]["volumes"]
    assert volumes == ["/data"], "a named volume would be one data dir for all replicas"


def test_replicas_keep_the_single_server_lifecycle(stack: dict[str, Any]) -> None:
    single = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
    server, replica = single["services"]["ragblend"], stack["services"]["ragblend"]
    for key in ("shm_size", "cap_add", "init", "stop_signal", "stop_grace_period", "restart"):
        assert replica[key] == server[key], key
    passed = ("RAGBLEND_MODEL", "RAGBLEND_API_KEYS", "RAGBLEND_API_KEYS_FILE")
    for key in (*passed, "RAGBLEND_SHUTDOWN_TIMEOUT"):
        assert replica["environment"][key] == server["environment"][key], key
    assert replica["build"]["dockerfile"] == server["build"]["dockerfile"]


def test_every_image_builds_from_one_base_with_debian_packages(stack: dict[str, Any]) -> None:
    dockerfile = (DOCKER / "Dockerfile.services").read_text(encoding="utf-8")
    for name, service in stack["services"].items():
        build = service["build"]
        assert build["args"] == {"BASE_IMAGE": "${RAGBLEND_BASE_IMAGE:-python:3.11-slim-bookworm}"}
        if name != "ragblend":
            assert build["dockerfile"] == "docker/Dockerfile.services"
            assert f"FROM ${{BASE_IMAGE}} AS {build['target']}\n" in dockerfile
    assert dockerfile.count("FROM ${BASE_IMAGE} AS ") == 3


def test_smoke_override_applies_to_the_replicas() -> None:
    smoke = yaml.safe_load((DOCKER / "compose.smoke.yaml").read_text(encoding="utf-8"))
    assert set(smoke["services"]) <= {"ragblend"}, "the override names the replica service"


def test_front_streams_unbuffered_over_http11_with_least_connections() -> None:
    text = (DOCKER / "nginx.conf").read_text(encoding="utf-8")
    for directive in (
        "least_conn;",
        "zone ragblend",
        "proxy_buffering off;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_read_timeout 1h;",
        "listen 8000;",
    ):
        assert directive in text, directive


def test_front_config_passes_nginx_t_with_the_upstreams_rewritten(tmp_path: Path) -> None:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.fail("nginx is not installed: run `bash scripts/install-services.sh`")
    (tmp_path / "tmp").mkdir()
    config = tmp_path / "nginx.conf"
    config.write_text(front_config(["127.0.0.1:9001", "127.0.0.1:9002"], 18080), encoding="utf-8")
    result = check_config(config, tmp_path)
    assert result.returncode == 0, result.stderr
    rewritten = config.read_text(encoding="utf-8")
    assert "server 127.0.0.1:9001 max_fails=3 fail_timeout=10s;" in rewritten
    assert "server 127.0.0.1:9002 max_fails=3 fail_timeout=10s;" in rewritten
    assert "listen 127.0.0.1:18080;" in rewritten and "ragblend:8000" not in rewritten


def test_front_config_with_a_broken_directive_fails_nginx_t(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    config = tmp_path / "nginx.conf"
    broken = front_config(["127.0.0.1:9001"], 18080).replace("least_conn;", "least_conns;")
    config.write_text(broken, encoding="utf-8")
    result = check_config(config, tmp_path)
    assert result.returncode != 0 and "least_conns" in result.stderr
