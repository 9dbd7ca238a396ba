"""Offline checks that the Helm chart (deploy/helm/ragblend) is valid for the clusters it
targets: it lints, every rendering of the value sets that matter is valid Kubernetes for the
oldest and newest versions kubernetes-validate knows (strict: no unknown fields), a 1.20 cluster
gets the APIs it has, every port names its protocol, and bad values fail with a message that says
what to set. Helm comes from scripts/install-k8s-tools.sh (scripts/install.sh dev runs it)."""

from __future__ import annotations

import functools
import json

import kubernetes_validate
import kubernetes_validate.utils
import pytest

from tests.unit.helm_render import (
    CHART,
    NEWEST,
    OLDEST,
    helm,
    needs_helm,
    one,
    render,
    render_error,
)

pytestmark = needs_helm
CRD_KINDS = {"ServiceMonitor", "ScaledObject"}
"""Kinds of other projects' CRDs: no schema in kubernetes-validate."""

VALUE_SETS = {
    "bundled stores": [],
    "external stores, 3 replicas": [
        "replicaCount=3",
        "postgresql.enabled=false",
        "externalLibrary.dsnSecret.name=library-dsn",
        "redis.enabled=false",
        "externalRedis.urlSecret.name=redis-url",
        "apiKeysSecret.name=keys",
        "chunkCacheSecret.existingSecret=chunk-cache",
    ],
    "one replica on SQLite": ["postgresql.enabled=false", "redis.enabled=false"],
    "HPA and monitoring": [
        "autoscaling.enabled=true",
        "autoscaling.maxReplicas=5",
        "monitoring.serviceMonitor.enabled=true",
        "monitoring.dashboard.enabled=true",
    ],
    "KEDA, keys, NodePort, hard spread": [
        "autoscaling.enabled=true",
        "autoscaling.keda.enabled=true",
        "monitoring.serviceMonitor.enabled=true",
        "apiKeys={key-a,key-b:team:admin}",
        "service.type=NodePort",
        "service.nodePort=30080",
        "spreadAcrossNodes=hard",
        "postgresql.persistence.enabled=false",
    ],
}


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once():
    """kubernetes-validate parses its 2 MB schema file on every call; the files do not change."""
    with pytest.MonkeyPatch.context() as patch:
        cached = functools.cache(kubernetes_validate.utils.schema_contents)
        patch.setattr(kubernetes_validate.utils, "schema_contents", cached)
        yield


def _validate(doc: dict, version: str) -> None:
    """Strict schema validation; a v1beta1 PodDisruptionBudget (Kubernetes < 1.21, older than
    every bundled schema) is checked against policy/v1, whose spec has the same fields."""
    if doc["kind"] == "PodDisruptionBudget" and doc["apiVersion"] == "policy/v1beta1":
        doc = {**doc, "apiVersion": "policy/v1"}
    kubernetes_validate.validate(doc, version, strict=True)


def test_chart_lints_strictly_in_every_value_set() -> None:
    for name, sets in VALUE_SETS.items():
        args = ["lint", "--strict", str(CHART)]
        for value in sets:
            args += ["--set", value]
        done = helm(*args)
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"


def test_schemas_are_the_oldest_and_newest_bundled() -> None:
    bundled = kubernetes_validate.utils.all_versions()
    assert (bundled[0], bundled[-1]) == (OLDEST, NEWEST)


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_every_rendering_is_valid_kubernetes(version: str) -> None:
    checked: dict[str, str] = {}
    unchecked: set[str] = set()
    for name, sets in VALUE_SETS.items():
        for doc in render(*sets, kube_version=version):
            if doc["kind"] in CRD_KINDS:
                unchecked.add(doc["kind"])
                continue
            key = json.dumps(doc, sort_keys=True)
            if key in checked:
                continue
            try:
                _validate(doc, version)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(map(str, error.path))
                pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']} {path}: {error}")
            checked[key] = name
    assert unchecked == CRD_KINDS  # both rendered somewhere, checked by the tests below
    kinds = {json.loads(key)["kind"] for key in checked}
    assert {"Deployment", "StatefulSet", "HorizontalPodAutoscaler", "PodDisruptionBudget"} <= kinds


def test_kubernetes_1_20_gets_autoscaling_v2beta2_and_policy_v1beta1() -> None:
    docs = render(
        "autoscaling.enabled=true",
        kube_version="1.20.2",
        api_versions=("autoscaling/v2beta2", "policy/v1beta1"),
    )
    assert one(docs, "HorizontalPodAutoscaler")["apiVersion"] == "autoscaling/v2beta2"
    assert one(docs, "PodDisruptionBudget")["apiVersion"] == "policy/v1beta1"
    for doc in docs:  # 1.25 is the oldest schema that still has autoscaling/v2beta2
        _validate(doc, OLDEST)
    modern = render("autoscaling.enabled=true")
    assert one(modern, "HorizontalPodAutoscaler")["apiVersion"] == "autoscaling/v2"
    assert one(modern, "PodDisruptionBudget")["apiVersion"] == "policy/v1"


def _ports(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    if doc["kind"] == "Service":
        return spec["ports"]
    pod = spec.get("template", {}).get("spec", {})
    containers = pod.get("containers", []) + pod.get("initContainers", [])
    return [port for container in containers for port in container.get("ports", [])]


def test_every_port_names_its_protocol() -> None:
    """Helm 4 applies server-side; Kubernetes 1.20 then needs `protocol` on every port."""
    for name, sets in VALUE_SETS.items():
        for doc in render(*sets):
            for port in _ports(doc):
                assert port.get("protocol") == "TCP", f"{name}: {doc['kind']} port {port}"


def test_crd_resources_target_the_server() -> None:
    docs = render(*VALUE_SETS["KEDA, keys, NodePort, hard spread"])
    scaled = one(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "demo-ragblend"
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus"
    assert "vllm:num_requests_waiting" in trigger["metadata"]["query"]
    assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]  # KEDA makes its own
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service = one(docs, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_hpa_scales_the_deployment_on_the_engine_queue() -> None:
    docs = render("autoscaling.enabled=true", "autoscaling.maxReplicas=6")
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "demo-ragblend",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 6)
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert "replicas" not in one(docs, "Deployment")["spec"]  # the HPA owns it


@pytest.mark.parametrize(
    ("sets", "wanted"),
    [
        (["replicaCount=2", "postgresql.enabled=false"], "shared document library"),
        (["replicaCount=2", "redis.enabled=false"], "shared chunk-KV tier"),
        (
            ["autoscaling.enabled=true", "postgresql.enabled=false", "redis.enabled=false"],
            "4 replicas need a shared document library",
        ),
        (["externalLibrary.dsnSecret.name=dsn"], "set postgresql.enabled=false"),
        (["settings.RAGBLEND_MODEL=x"], "without the RAGBLEND_ prefix (settings.MODEL)"),
        (["settings.model=x"], "upper case"),
        (["settings.DATABASE_URL=postgresql://x"], "externalLibrary.dsnSecret.name"),
        (["settings.PORT=9000"], "service.port"),
        (["spreadAcrossNodes=sometimes"], "soft"),
        (["replicas=2"], "additional properties 'replicas' not allowed"),  # values.schema.json
        (["replicaCount=two"], "/replicaCount"),
        (["service.type=Ingress"], "/service/type"),
    ],
)
def test_bad_values_fail_with_what_to_set(sets: list[str], wanted: str) -> None:
    assert wanted in render_error(*sets)


def test_replicas_without_shared_stores_fail_naming_both() -> None:
    error = render_error("replicaCount=2", "postgresql.enabled=false", "redis.enabled=false")
    assert "2 replicas need" in error
    assert "postgresql.enabled=true" in error
    assert "redis.enabled=true" in error
