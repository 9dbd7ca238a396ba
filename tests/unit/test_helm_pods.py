"""What the chart's pods do, from their rendering: memory and disk sized from the cache settings,
probes and drain that match /health and the server's shutdown, a data dir per mode, spread across
nodes and off a lost one, kept secrets, the images the Docker build makes, the repository's
dashboard, and install notes that say how to reach the server."""

from __future__ import annotations

import base64
import json
import re

from tests.unit.helm_render import CHART, REPO, helm, needs_helm, one, render, server

pytestmark = needs_helm
DASHBOARD = REPO / "docker" / "grafana" / "dashboards" / "ragblend.json"
SQLITE = ["postgresql.enabled=false", "redis.enabled=false"]


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
    docs = render(*SQLITE)
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


def test_bundled_postgresql_owns_the_volume_it_runs_on() -> None:
    """A new volume belongs to root: the init container that hands it to `postgres` must mount
    the very volume (at the same path) that the database then initializes."""
    for persistence in ("true", "false"):
        docs = render(f"postgresql.persistence.enabled={persistence}")
        statefulset = one(docs, "StatefulSet", "demo-ragblend-postgresql")
        pod = statefulset["spec"]["template"]["spec"]
        [owner] = pod["initContainers"]
        [database] = pod["containers"]
        assert owner["volumeMounts"] == database["volumeMounts"]
        assert "chown postgres:postgres /var/lib/postgresql/data" in owner["command"][-1]


def test_the_bundled_stores_go_where_their_node_selectors_say() -> None:
    docs = render("postgresql.nodeSelector.disk=ssd", "redis.nodeSelector.zone=a")
    postgres = one(docs, "StatefulSet", "demo-ragblend-postgresql")["spec"]["template"]["spec"]
    redis = one(docs, "Deployment", "demo-ragblend-redis")["spec"]["template"]["spec"]
    assert (postgres["nodeSelector"], redis["nodeSelector"]) == ({"disk": "ssd"}, {"zone": "a"})
    assert (
        "nodeSelector"
        not in one(render(), "Deployment", "demo-ragblend-redis")["spec"]["template"]["spec"]
    )
