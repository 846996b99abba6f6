"""karpy observed as a Karpenter user observes it: a real Prometheus (Debian's package, on
127.0.0.1) scrapes a running karpy through a walkthrough, `promtool check metrics` accepts the
exposition, and every query of the Grafana dashboard in deploy/grafana returns at least one series.

The walkthrough provisions two nodes for `inflate` (capacity, cost, provisioning latency) and then
scales it to zero so the empty nodes are disrupted (disruption). Gauges of things that exist only
while nodes run are checked while they run; counters of what happened, at the end: a query passes
when it returned a series at either checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from karpy.localcluster.process import free_port
from karpy.operator.components import Components
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    no_nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support.marks import ONE_AT_A_TIME
from tests.support.processes import stop
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), ONE_AT_A_TIME]

KARPENTER_NAMES_PROMTOOL_FLAGS = frozenset(
    {"karpenter_cluster_state_node_count", "karpenter_scheduler_unschedulable_pods_count"}
)
"""Gauges whose Karpenter names end in `_count`, which promtool's linter reserves for histograms
and summaries. karpy keeps Karpenter's names so dashboards and alerts carry over; every other
finding fails the test."""

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "karpy-dashboard.json"


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def _get(url: str, *, timeout: float = 10.0) -> str:
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        body: bytes = response.read()
    return body.decode()


@contextmanager
def prometheus(target_port: int, directory: Path) -> Iterator[str]:
    """Debian's Prometheus scraping 127.0.0.1:`target_port` every second; yields its base URL."""
    binary = shutil.which("prometheus")
    if binary is None:  # scripts/bootstrap installs it; without it this suite is incomplete
        pytest.fail("prometheus is not on PATH: run scripts/bootstrap (Debian: prometheus)")
    config = directory / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: karpy\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
    )
    port = free_port()
    log = (directory / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
        log.close()


async def query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    answer = json.loads(await asyncio.to_thread(_get, url))
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


@asynccontextmanager
async def scraped(components: Components, directory: Path) -> AsyncIterator[str]:
    probes = components.probes
    await eventually(lambda: _bound(probes.metrics_port), within=30, what="karpy's /metrics")
    with prometheus(probes.metrics_port, directory) as base:

        async def up() -> list[dict[str, Any]]:
            try:
                return [s for s in await query(base, 'up{job="karpy"}') if s["value"][1] == "1"]
            except OSError:
                return []

        await eventually(up, within=60, what="Prometheus scraping karpy")
        yield base


def _over_node_gauges(expr: str) -> bool:
    """Whether `expr` reads the per-node gauges (karpenter_nodes_allocatable, ...), not the
    nodes' counters (created, terminated), which the scale-in completes."""
    counters = ("karpenter_nodes_created_total", "karpenter_nodes_terminated_total")
    return "karpenter_nodes_" in expr and not any(name in expr for name in counters)


async def _bound(port: int) -> bool:
    return port != 0


def promtool_check(exposition: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool comes with Debian's prometheus package"
    return subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_prometheus_scrapes_karpy_and_every_dashboard_query_has_series(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 10
    pool, labels = await fresh_nodepool(
        api_client, "observe", consolidate_after="1s", limits={"cpu": "1000"}
    )
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=labels))
    answered: set[str] = set()

    async with (
        running_daemon(cluster_info) as components,
        scraped(components, tmp_path) as base,
    ):
        await scale(api_client, namespace, "inflate", 2)
        await eventually(running(api_client, namespace, "inflate", 2), within=90)

        async def costed() -> list[dict[str, Any]]:
            return await query(base, f'karpy_nodepools_cost_per_hour{{nodepool="{pool}"}}')

        (cost,) = await eventually(costed, within=90, what="the NodePool's cost scraped")
        assert float(cost["value"][1]) > 0

        async def nodes_answered() -> bool:
            # Queries over the nodes' gauges have series only while the nodes run: wait for a
            # scrape that has them before the scale-in takes the nodes away.
            answered.update([q for q in queries if q not in answered and await query(base, q)])
            return all(q in answered for q in queries if _over_node_gauges(q))

        await eventually(nodes_answered, within=60, what="the node queries answered")

        exposition = await asyncio.to_thread(
            _get, f"http://127.0.0.1:{components.probes.metrics_port}/metrics"
        )
        checked = promtool_check(exposition)
        output = checked.stdout + checked.stderr  # promtool prints its findings on stderr
        findings = [line for line in output.splitlines() if line.strip()]
        unexpected = [
            line
            for line in findings
            if line.split(" ", 1)[0] not in KARPENTER_NAMES_PROMTOOL_FLAGS
            or 'should not have "_count" suffix' not in line
        ]
        assert checked.returncode == 0 or (findings and not unexpected), (
            checked.stdout + checked.stderr
        )
        assert not unexpected, unexpected

        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_nodeclaims(api_client, pool), within=90)

        async def disrupted() -> list[dict[str, Any]]:
            expr = f'karpenter_nodeclaims_disrupted_total{{nodepool="{pool}",reason="empty"}}'
            return await query(base, expr)

        await eventually(disrupted, within=30, what="the disruption scraped")

        async def unanswered() -> list[str]:
            # increase() and rate() need a second scrape of a series that just appeared.
            answered.update([q for q in queries if q not in answered and await query(base, q)])
            return [q for q in queries if q not in answered]

        async def all_answered() -> bool:
            return not await unanswered()

        try:
            await eventually(all_answered, within=60, what="every dashboard query answered")
        except AssertionError as error:
            raise AssertionError(f"queries with no series: {await unanswered()}") from error

    assert answered == set(queries)
