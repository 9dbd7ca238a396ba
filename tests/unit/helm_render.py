"""Rendering the Helm chart (deploy/helm/ragblend) for the chart's offline tests: where Helm is,
``helm template`` with ``--set`` values parsed into manifests, and the objects the tests look at."""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "ragblend"
OLDEST, NEWEST = "1.25.0", "1.37.0"
"""The oldest and newest Kubernetes whose schemas kubernetes-validate bundles."""


def _find_helm() -> str | None:
    candidates = [
        os.environ.get("RAGBLEND_HELM"),
        Path(sys.executable).parent / "helm",
        REPO / ".venv" / "bin" / "helm",
        shutil.which("helm"),
    ]
    return next((str(c) for c in candidates if c and os.access(c, os.X_OK)), None)


HELM = _find_helm()
needs_helm = pytest.mark.skipif(
    HELM is None, reason="helm is not installed: run bash scripts/install-k8s-tools.sh"
)
"""Marks a module whose tests run Helm (scripts/install.sh dev installs it)."""


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def _template_args(sets: list[str], kube_version: str, api_versions: tuple[str, ...], release: str):
    args = ["template", release, str(CHART), "--namespace", "serving"]
    args += ["--kube-version", kube_version]
    for api in api_versions:
        args += ["--api-versions", api]
    for value in sets:
        args += ["--set", value]
    return args


@functools.cache
def _render(sets: tuple[str, ...], kube_version: str, api_versions: tuple[str, ...], release: str):
    done = helm(*_template_args(list(sets), kube_version, api_versions, release))
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render(
    *sets: str,
    kube_version: str = NEWEST,
    api_versions: tuple[str, ...] = (),
    release: str = "demo",
) -> list[dict]:
    """The manifests of ``helm template`` with these ``--set`` values (a fresh copy)."""
    return copy.deepcopy(_render(sets, kube_version, api_versions, release))


def render_error(*sets: str) -> str:
    done = helm(*_template_args(list(sets), NEWEST, (), "demo"))
    assert done.returncode != 0, f"rendered although it should fail: {sets}"
    return done.stderr


def one(docs: list[dict], kind: str, name: str = "demo-ragblend") -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def server(docs: list[dict], name: str = "demo-ragblend") -> dict:
    """The server container of the Deployment."""
    return one(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
