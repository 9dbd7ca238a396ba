"""Compose wiring, the image's entrypoint and the smoke test's override, checked statically.

`scripts/docker-test.sh` runs the same files for real when a Docker engine can be started.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def test_compose_defines_cpu_and_gpu_services_and_only_the_cpu_one_starts(
    services: dict[str, Any],
) -> None:
    assert set(services) == {"ragblend", "ragblend-cuda", "prometheus", "grafana"}
    starting_by_default = {name for name, service in services.items() if "profiles" not in service}
    assert starting_by_default == {"ragblend"}
    assert services["ragblend-cuda"]["profiles"] == ["gpu"]


@pytest.mark.parametrize(
    ("service", "dockerfile"),
    [("ragblend", "docker/Dockerfile.cpu"), ("ragblend-cuda", "docker/Dockerfile.cuda")],
)
def test_service_builds_its_dockerfile_from_the_repository_root(
    services: dict[str, Any], service: str, dockerfile: str
) -> None:
    build = services[service]["build"]
    context = (DOCKER / build["context"]).resolve()
    assert context == REPO
    assert build["dockerfile"] == dockerfile
    assert (context / build["dockerfile"]).is_file()


@pytest.mark.parametrize("service", ["ragblend", "ragblend-cuda"])
def test_service_publishes_on_loopback_unless_told_and_keeps_data_in_the_named_volume(
    compose: dict[str, Any], services: dict[str, Any], service: str
) -> None:
    wiring = services[service]
    assert wiring["ports"] == ["${RAGBLEND_BIND:-127.0.0.1}:${RAGBLEND_PORT:-8000}:8000"]
    assert "ragblend-data:/data" in wiring["volumes"]
    assert "ragblend-data" in compose["volumes"]
    environment = wiring["environment"]
    assert environment["RAGBLEND_MODEL"] == "${RAGBLEND_MODEL:-qwen2.5-coder-0.5b-instruct}"
    assert environment["RAGBLEND_API_KEYS"] == "${RAGBLEND_API_KEYS:-}"
    assert environment["RAGBLEND_API_KEYS_FILE"] == "${RAGBLEND_API_KEYS_FILE:-}"
    # The entrypoint learns where the port is published, to refuse serving it without a key.
    assert environment["RAGBLEND_PUBLISHED_ON"] == "${RAGBLEND_BIND:-127.0.0.1}"
    assert "secrets" not in wiring, "the default stack mounts no CA or other secret"
    assert "secrets" not in wiring["build"]


@pytest.mark.parametrize("service", ["ragblend", "ragblend-cuda"])
def test_service_stops_within_its_grace_period_and_comes_back(
    services: dict[str, Any], service: str
) -> None:
    wiring = services[service]
    assert wiring["init"] is True, "Docker's init reaps engine workers and forwards SIGTERM"
    assert wiring["stop_signal"] == "SIGTERM"
    grace_s = int(wiring["stop_grace_period"].removesuffix("s"))
    drain_s = float(wiring["environment"]["RAGBLEND_SHUTDOWN_TIMEOUT"].split(":-")[1][:-1])
    assert drain_s < grace_s <= 10, "the drain must end before Docker's SIGKILL"
    assert wiring["restart"] == "unless-stopped"


def test_compose_shutdown_default_matches_the_server_setting(services: dict[str, Any]) -> None:
    from gateway.settings import Settings

    field = Settings.model_fields.get("shutdown_timeout")
    if field is None:
        pytest.skip("gateway.settings has no shutdown_timeout yet")
    default = services["ragblend"]["environment"]["RAGBLEND_SHUTDOWN_TIMEOUT"]
    assert default == f"${{RAGBLEND_SHUTDOWN_TIMEOUT:-{field.default:g}}}"


def test_root_compose_file_is_the_docker_one_under_the_project_name() -> None:
    root = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    assert root == {"name": "ragblend", "include": ["docker/compose.yaml"]}


def test_gpu_service_reserves_nvidia_devices(services: dict[str, Any]) -> None:
    devices = services["ragblend-cuda"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)


def run_entrypoint(**environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(DOCKER / "entrypoint.sh"), "echo", "serving"],
        env={"PATH": "/usr/bin:/bin", **environment},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("published_on", ["", "127.0.0.1", "localhost", "::1"])
def test_entrypoint_serves_on_loopback_without_a_key(published_on: str) -> None:
    environment = {"RAGBLEND_PUBLISHED_ON": published_on} if published_on else {}
    result = run_entrypoint(**environment)
    assert (result.returncode, result.stdout) == (0, "serving\n")


def test_entrypoint_refuses_a_public_port_without_a_key_and_says_why() -> None:
    result = run_entrypoint(RAGBLEND_PUBLISHED_ON="0.0.0.0", RAGBLEND_API_KEYS="")
    assert result.returncode == 64
    assert result.stdout == ""
    assert "RAGBLEND_API_KEYS" in result.stderr and "0.0.0.0" in result.stderr


def test_entrypoint_serves_a_public_port_with_a_key() -> None:
    result = run_entrypoint(RAGBLEND_PUBLISHED_ON="0.0.0.0", RAGBLEND_API_KEYS="k1")
    assert (result.returncode, result.stdout) == (0, "serving\n")


def test_entrypoint_serves_a_public_port_with_a_key_file_but_not_an_empty_one(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "api_keys"
    keys.write_text("")
    public = {"RAGBLEND_PUBLISHED_ON": "0.0.0.0", "RAGBLEND_API_KEYS_FILE": str(keys)}
    refused = run_entrypoint(**public)
    assert refused.returncode == 64 and "RAGBLEND_API_KEYS_FILE" in refused.stderr
    keys.write_text("k1:team\n")
    served = run_entrypoint(**public)
    assert (served.returncode, served.stdout) == (0, "serving\n")


def test_smoke_override_passes_the_ca_as_secrets_and_local_build_settings() -> None:
    smoke = yaml.safe_load((DOCKER / "compose.smoke.yaml").read_text(encoding="utf-8"))
    service = smoke["services"]["ragblend"]
    assert service["image"] == "ragblend:cpu-smoke", "the test never overwrites ragblend:cpu"
    assert service["build"]["secrets"] == ["pip_ca"] and service["secrets"] == ["pip_ca"]
    assert service["environment"] == {"PIP_CERT": "/run/secrets/pip_ca"}
    assert set(service["build"]["args"]) == {"BASE_IMAGE", "TORCH_CPU_INDEX"}
    assert smoke["secrets"]["pip_ca"]["file"].startswith("${RAGBLEND_DOCKER_CA_BUNDLE")
