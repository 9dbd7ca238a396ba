"""The monitoring profile: Prometheus scrapes every ragblend service, Grafana loads the dashboard.

Grafana cannot run on these machines, so its dashboard JSON is checked for the structure Grafana
needs; scripts/docker-test.sh runs every dashboard query against a real Prometheus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.script_import import import_script

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "ragblend.json"
GRID_COLUMNS = 24


monitoring_check = import_script("monitoring_check", DOCKER)  # what docker-test.sh runs
# What the issue asks the dashboard to show, as the metric each panel must query.
REQUIRED_METRICS = {
    "ragblend_requests_total",
    "ragblend_time_to_first_token_seconds_bucket",
    "ragblend_requests_in_flight",
    "ragblend_generation_tokens_total",
    "ragblend_blend_chunks_total",
    "ragblend_blend_tokens_total",
    "ragblend_precomputed_chunks_total",
    "ragblend_chunk_store_bytes",
    "ragblend_chunk_store_evictions_total",
    "ragblend_documents",
    "ragblend_precompute_pending_chunks",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
}
METRIC = re.compile(r"\b(?:ragblend_\w+|vllm:\w+)")


def load_yaml(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose_services() -> dict[str, Any]:
    return load_yaml(DOCKER / "compose.yaml")["services"]


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_monitoring_services_start_only_with_their_profile(
    compose_services: dict[str, Any],
) -> None:
    for name in ("prometheus", "grafana"):
        service = compose_services[name]
        assert service["profiles"] == ["monitoring"]
        [port] = service["ports"]
        assert port.startswith("127.0.0.1:"), f"{name} is published on loopback only"


def test_prometheus_scrapes_every_ragblend_service(compose_services: dict[str, Any]) -> None:
    config = load_yaml(DOCKER / "prometheus" / "prometheus.yml")
    targets = {
        target
        for job in config["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    ragblend_services = {name for name in compose_services if name.startswith("ragblend")}
    assert targets == {f"{name}:8000" for name in ragblend_services}
    mounted = compose_services["prometheus"]["volumes"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounted


def test_grafana_provisions_the_prometheus_source_and_the_dashboard_folder(
    compose_services: dict[str, Any], dashboard: dict[str, Any]
) -> None:
    provisioning = DOCKER / "grafana" / "provisioning"
    [source] = load_yaml(provisioning / "datasources" / "prometheus.yaml")["datasources"]
    assert (source["type"], source["url"]) == ("prometheus", "http://prometheus:9090")
    [provider] = load_yaml(provisioning / "dashboards" / "ragblend.yaml")["providers"]
    mounts = compose_services["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    uids = {
        target["datasource"]["uid"] for panel in dashboard["panels"] for target in panel["targets"]
    }
    assert uids == {source["uid"]}


def test_dashboard_has_the_fields_grafana_needs(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= GRID_COLUMNS and grid["h"] > 0, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]


def test_dashboard_shows_every_required_metric(dashboard: dict[str, Any]) -> None:
    queried = {
        metric
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for metric in METRIC.findall(target["expr"])
    }
    assert queried >= REQUIRED_METRICS, f"missing {REQUIRED_METRICS - queried}"


def test_every_query_follows_the_replica_picked(dashboard: dict[str, Any]) -> None:
    [variable] = dashboard["templating"]["list"]
    assert (variable["name"], variable["includeAll"], variable["allValue"]) == (
        "replica",
        True,
        monitoring_check.ALL_REPLICAS,
    )
    assert "instance)" in variable["definition"]
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            selectors = len(METRIC.findall(expr))
            assert expr.count('instance=~"$replica"') == selectors, expr
    for _, expr in monitoring_check.dashboard_queries(dashboard, "2m"):
        assert "$" not in expr, f"a variable Prometheus cannot read: {expr}"


def test_dashboard_shows_ttft_percentiles(dashboard: dict[str, Any]) -> None:
    [ttft] = [panel for panel in dashboard["panels"] if panel["title"] == "Time to first token"]
    quantiles = [re.match(r"histogram_quantile\(([\d.]+),", t["expr"]) for t in ttft["targets"]]
    assert [match.group(1) for match in quantiles if match] == ["0.5", "0.95", "0.99"]
