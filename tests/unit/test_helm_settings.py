"""Every ragblend setting reaches the chart's pods, and the environment a pod gets (Kubernetes'
service links, the settings ConfigMap, the Secrets, ``$(VAR)`` expanded as the kubelet does) loads
as the server's settings: the bundled stores found by ClusterIP, without cluster DNS."""

from __future__ import annotations

import os
import re

import pytest

from gateway.settings import Settings
from tests.unit.helm_render import needs_helm, one, render, server
from tests.unit.script_import import import_script

pytestmark = needs_helm


def _setting_env_names() -> list[str]:
    """Every setting's environment variable, as the README's settings table names them."""
    table = import_script("settings_table")
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


def test_settings_change_rolls_the_pods() -> None:
    def checksum(*sets: str) -> str:
        annotations = one(render(*sets), "Deployment")["spec"]["template"]["metadata"]
        return annotations["annotations"]["checksum/settings"]

    assert checksum() != checksum("settings.RETRIEVAL_TOP_K=9")
