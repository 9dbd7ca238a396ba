"""Check that every query of the Grafana dashboard returns data from a real Prometheus.

scripts/docker-test.sh starts Debian's ``prometheus`` against the smoke test's server before
sending traffic, then runs this: each panel target's PromQL (Grafana's ``$__rate_interval``
replaced by a fixed window, the ``$replica`` variable by its "All" value) must return at least one
series with a number (not NaN). Exits 1 and names the queries that came back empty.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import httpx

DASHBOARD = Path(__file__).parent / "grafana" / "dashboards" / "ragblend.json"
ALL_REPLICAS = ".*"
"""The ``replica`` template variable's ``allValue``: every scraped instance."""


def dashboard_queries(dashboard: dict[str, Any], rate_window: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target, with Grafana's variables filled in."""
    return [
        (
            panel["title"],
            target["expr"]
            .replace("$__rate_interval", rate_window)
            .replace("$replica", ALL_REPLICAS),
        )
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def has_number(result: list[dict[str, Any]]) -> bool:
    return any(not math.isnan(float(series["value"][1])) for series in result)


def empty_queries(prometheus: str, queries: list[tuple[str, str]]) -> list[str]:
    empty = []
    for title, expr in queries:
        reply = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
        reply.raise_for_status()
        if not has_number(reply.json()["data"]["result"]):
            empty.append(f"{title}: {expr}")
    return empty


def wait_for_target(prometheus: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            up = httpx.get(f"{prometheus}/api/v1/query", params={"query": "up"}, timeout=5)
            if any(s["value"][1] == "1" for s in up.json()["data"]["result"]):
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"Prometheus at {prometheus} scraped no live target in {timeout_s:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["wait", "check"])
    parser.add_argument("--prometheus", required=True, help="e.g. http://127.0.0.1:19090")
    parser.add_argument("--rate-window", default="2m")
    args = parser.parse_args()
    if args.phase == "wait":
        wait_for_target(args.prometheus, timeout_s=60)
        return 0
    queries = dashboard_queries(json.loads(DASHBOARD.read_text()), args.rate_window)
    empty = empty_queries(args.prometheus, queries)
    for query in empty:
        print(f"no data: {query}", file=sys.stderr)
    print(json.dumps({"dashboard_queries": len(queries), "without_data": len(empty)}))
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
