"""Offline checks of the Helm chart (deploy/helm/ragblend): it lints, every rendering of the value
sets that matter is valid Kubernetes for the oldest and newest versions kubernetes-validate knows
(strict: no unknown fields), a 1.20 cluster gets the APIs it has, bad values fail with a message
that says what to set, every setting reaches the pods, and the server starts from what the pods
get. Helm comes from scripts/install-k8s-tools.sh (scripts/install.sh dev runs it)."""

from __future__ import annotations

import base64
import copy
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from gateway.settings import Settings

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "ragblend"
DASHBOARD = REPO / "docker" / "grafana" / "dashboards" / "ragblend.json"
OLDEST, NEWEST = "1.25.0", "1.37.0"
"""The oldest and newest Kubernetes whose schemas kubernetes-validate bundles."""
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


def _find_helm() -> str | None:
    candidates = [
        os.environ.get("RAGBLEND_HELM"),
        Path(sys.executable).parent / "helm",
        REPO / ".venv" / "bin" / "helm",
        shutil.which("helm"),
    ]
    return next((str(c) for c in candidates if c and os.access(c, os.X_OK)), None)


HELM = _find_helm()
pytestmark = pytest.mark.skipif(
    HELM is None, reason="helm is not installed: run bash scripts/install-k8s-tools.sh"
)


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


def _setting_env_names() -> list[str]:
    """Every setting's environment variable, as the README's settings table names them."""
    path = REPO / "scripts" / "settings_table.py"
    spec = importlib.util.spec_from_file_location("settings_table", path)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    fields = table.ordered_fields(Settings)
    return [env for name, field in fields for env in table.env_names(Settings, name, field)]


SETTING_ENV = _setting_env_names()
CHART_SET = {"HOST", "PORT", "DATA_DIR", "DATABASE_URL", "CHUNK_CACHE_REDIS_URL"}
CHART_SET |= {"CHUNK_CACHE_SECRET", "API_KEYS"}


def test_every_setting_reaches_the_settings_configmap() -> None:
    names = [env.removeprefix("RAGBLEND_") for env in SETTING_ENV]
    free = [name for name in names if name not in CHART_SET]
    docs = render(*(f"settings.{name}=v-{name.lower()}" for name in free))
    data = one(docs, "ConfigMap", "demo-ragblend-settings")["data"]
    for name in free:
        assert data[f"RAGBLEND_{name}"] == f"v-{name.lower()}"
    container = server(docs)
    assert {"configMapRef": {"name": "demo-ragblend-settings"}} in container["envFrom"]
    env = {item["name"] for item in container["env"]}
    assert {f"RAGBLEND_{name}" for name in CHART_SET - {"API_KEYS"}} <= env


def test_setting_values_keep_their_text() -> None:
    """Large integers without exponent, lists comma-separated, booleans as pydantic reads them."""
    docs = render(
        "settings.MAX_DOCUMENT_BYTES=10485760",
        "settings.SHARED_KV_PROJECTS={default,team}",
        "settings.BLEND_SEGMENT=true",
        "settings.BLEND_RECOMPUTE_RATIO=0.15",
    )
    data = one(docs, "ConfigMap", "demo-ragblend-settings")["data"]
    assert data["RAGBLEND_MAX_DOCUMENT_BYTES"] == "10485760"
    assert data["RAGBLEND_SHARED_KV_PROJECTS"] == "default,team"
    assert data["RAGBLEND_BLEND_SEGMENT"] == "true"
    assert data["RAGBLEND_BLEND_RECOMPUTE_RATIO"] == "0.15"


def _service_env(service: dict, cluster_ip: str) -> dict[str, str]:
    """The variables Kubernetes injects into later pods for a Service (its "service links")."""
    prefix = service["metadata"]["name"].upper().replace("-", "_")
    first = service["spec"]["ports"][0]
    env = {
        f"{prefix}_SERVICE_HOST": cluster_ip,
        f"{prefix}_SERVICE_PORT": str(first["port"]),
        f"{prefix}_PORT": f"tcp://{cluster_ip}:{first['port']}",
    }
    for port in service["spec"]["ports"]:
        number, name = port["port"], port.get("name", "")
        if name:
            env[f"{prefix}_SERVICE_PORT_{name.upper().replace('-', '_')}"] = str(number)
        base = f"{prefix}_PORT_{number}_TCP"
        env[base] = f"tcp://{cluster_ip}:{number}"
        env[f"{base}_PROTO"] = "tcp"
        env[f"{base}_PORT"] = str(number)
        env[f"{base}_ADDR"] = cluster_ip
    return env


def _pod_env(docs: list[dict], secrets: dict[str, str]) -> dict[str, str]:
    """The server's environment as the kubelet builds it: service links, then the ConfigMap,
    then the container's own variables (which win), with $(VAR) expanded."""
    links: dict[str, str] = {}
    services = [d for d in docs if d["kind"] == "Service"]
    for number, service in enumerate(services):
        links.update(_service_env(service, f"10.96.0.{10 + number}"))
    container = server(docs, next(d for d in docs if d["kind"] == "Deployment")["metadata"]["name"])
    env: dict[str, str] = {}
    for source in container["envFrom"]:
        env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    for item in container["env"]:
        if "valueFrom" in item:
            env[item["name"]] = secrets[item["valueFrom"]["secretKeyRef"]["name"]]
        else:
            env[item["name"]] = _expand(item["value"], {**links, **env})
    return {**links, **env}


def _expand(value: str, known: dict[str, str]) -> str:
    """$(VAR) replaced as the kubelet does: by a variable defined before, else left as it is."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: known.get(m[1], m[0]), value)


def test_a_release_named_ragblend_sets_no_setting_through_service_links() -> None:
    """A Service named `ragblend` makes Kubernetes inject RAGBLEND_PORT=tcp://...: the chart
    sets every such variable that is a setting in the container itself."""
    docs = render(release="ragblend")
    services = [d for d in docs if d["kind"] == "Service"]
    assert "ragblend" in {s["metadata"]["name"] for s in services}
    own = {item["name"] for item in server(docs, "ragblend")["env"]}
    for service in services:
        clashes = set(_service_env(service, "10.0.0.1")) & set(SETTING_ENV)
        assert clashes <= own, f"service {service['metadata']['name']} would set {clashes - own}"


@pytest.mark.parametrize("release", ["demo", "ragblend"])
def test_the_server_loads_its_settings_from_what_the_pod_gets(
    release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundled stores are reached by ClusterIP, without DNS: the DSN and the Redis URL are
    built from the variables Kubernetes injects for the chart's own Services."""
    docs = render("settings.KV_CACHE_GIB=6", "apiKeys={key-a}", release=release)
    name = "ragblend" if release == "ragblend" else f"{release}-ragblend"
    secrets = {
        f"{name}-chunk-cache": "ab" * 32,
        f"{name}-postgresql": "0123456789abcdef0123456789abcdef",
        f"{name}-api-keys": "key-a",
    }
    env = _pod_env(docs, secrets)
    for key in [key for key in os.environ if key.startswith("RAGBLEND_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    hosts = {s["metadata"]["name"]: _service_env(s, "") for s in docs if s["kind"] == "Service"}
    postgres_ip = env[next(k for k in hosts[f"{name}-postgresql"] if k.endswith("_SERVICE_HOST"))]
    redis_ip = env[next(k for k in hosts[f"{name}-redis"] if k.endswith("_SERVICE_HOST"))]
    assert settings.database_url == (
        f"postgresql://ragblend:0123456789abcdef0123456789abcdef@{postgres_ip}:5432/ragblend"
    )
    assert settings.chunk_cache_redis_url == f"redis://{redis_ip}:6379/0"
    assert (settings.host, settings.port, str(settings.data_dir)) == ("0.0.0.0", 8000, "/data")
    assert settings.kv_cache_gib == 6
    assert settings.chunk_cache_secret.get_secret_value() == "ab" * 32
    assert list(settings.key_callers) == ["key-a"]


def test_memory_and_disk_follow_the_cache_settings() -> None:
    docs = render(
        "settings.KV_CACHE_GIB=10",
        "settings.CHUNK_CACHE_MEMORY_GIB=3",
        "settings.CHUNK_CACHE_DISK_GIB=50",
        "sizing.baseMemoryGiB=5",
    )
    resources = server(docs)["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == f"{18 * 1024}Mi"
    assert "cpu" not in resources["limits"]
    volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["emptyDir"]["sizeLimit"] == f"{(50 + 6) * 1024}Mi"
    ranks = server(render("settings.TENSOR_PARALLEL_SIZE=2"))["resources"]  # a cache per rank
    assert ranks["limits"]["memory"] == f"{(4 + 4 * 2 + 2) * 1024}Mi"
    given = server(render("resources.requests.memory=3Gi"))["resources"]
    assert given == {"requests": {"memory": "3Gi"}}


def test_probes_and_drain_match_health_and_shutdown() -> None:
    docs = render("settings.SHUTDOWN_TIMEOUT=45", "probes.startupSeconds=600")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600  # loading is no failure
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert sleep > 0
    assert pod["terminationGracePeriodSeconds"] >= sleep + 45 + 1  # the drain ends before SIGKILL
    strategy = one(docs, "Deployment")["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0


def test_single_sqlite_replica_keeps_its_data_dir_and_recreates() -> None:
    docs = render(*VALUE_SETS["one replica on SQLite"])
    claim = one(docs, "PersistentVolumeClaim", "demo-ragblend-data")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one data dir, one server
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "demo-ragblend-data"
    shared = one(render(), "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert "emptyDir" in {v["name"]: v for v in shared}["data"]


def test_pods_spread_across_nodes_and_leave_a_lost_node() -> None:
    pod = one(render("nodeLossToleranceSeconds=20"), "Deployment")["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    lost = {t["key"]: t["tolerationSeconds"] for t in pod["tolerations"]}
    assert lost == {"node.kubernetes.io/not-ready": 20, "node.kubernetes.io/unreachable": 20}
    hard = one(render("spreadAcrossNodes=hard"), "Deployment")["spec"]["template"]["spec"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in hard["affinity"]["podAntiAffinity"]


def test_settings_change_rolls_the_pods() -> None:
    def checksum(*sets: str) -> str:
        annotations = one(render(*sets), "Deployment")["spec"]["template"]["metadata"]
        return annotations["annotations"]["checksum/settings"]

    assert checksum() != checksum("settings.RETRIEVAL_TOP_K=9")


def test_generated_secrets_are_hex_and_kept_on_uninstall() -> None:
    docs = render()
    chunk = one(docs, "Secret", "demo-ragblend-chunk-cache")
    value = base64.b64decode(chunk["data"]["secret"]).decode()
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    password = base64.b64decode(one(docs, "Secret", "demo-ragblend-postgresql")["data"]["password"])
    assert re.fullmatch(rb"[0-9a-f]{32}", password)  # URL-safe inside the DSN
    for secret in (chunk, one(docs, "Secret", "demo-ragblend-postgresql")):
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    template = (CHART / "templates" / "secrets.yaml").read_text(encoding="utf-8")
    assert template.count('lookup "v1" "Secret"') == 2  # read back on upgrade


def test_images_default_to_what_the_docker_build_makes() -> None:
    docs = render()
    assert server(docs)["image"] == "ragblend:cpu"
    postgres = one(docs, "StatefulSet", "demo-ragblend-postgresql")["spec"]["template"]["spec"]
    assert postgres["containers"][0]["image"] == "ragblend-postgres:15"
    redis = one(docs, "Deployment", "demo-ragblend-redis")["spec"]["template"]["spec"]
    assert redis["containers"][0]["image"] == "ragblend-redis:7"
    for container in (server(docs), postgres["containers"][0], redis["containers"][0]):
        assert container["imagePullPolicy"] == "IfNotPresent"
    custom = render("image.tag=cpu-smoke", "redis.image.pullPolicy=Never")
    assert server(custom)["image"] == "ragblend:cpu-smoke"


def test_dashboard_configmap_is_the_repository_dashboard() -> None:
    docs = render("monitoring.dashboard.enabled=true", "monitoring.dashboard.datasourceUid=prom")
    config = one(docs, "ConfigMap", "demo-ragblend-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(config["data"]["ragblend.json"])
    wanted = json.loads(
        DASHBOARD.read_text(encoding="utf-8").replace('"ragblend-prometheus"', '"prom"')
    )
    assert shipped == wanted
    assert "ragblend-prometheus" not in config["data"]["ragblend.json"]


def test_notes_say_how_to_reach_it() -> None:
    done = helm("install", "demo", str(CHART), "--namespace", "serving", "--dry-run=client")
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert "port-forward service/demo-ragblend 8000:8000" in notes
    assert "clusterIP" in notes
    assert "no API keys" in notes
