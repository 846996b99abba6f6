"""karpy observed as a Karpenter user observes it: a real Prometheus (Debian's package, on
127.0.0.1) scrapes a running karpy through a walkthrough, `promtool check metrics` accepts the
exposition, every query of the Grafana dashboard in deploy/grafana returns at least one series,
and so does every metric docs/metrics.md names (but those whose scenario is not walked here,
each listed with where it is; test_observability_aws.py walks the AWS path: an interruption
and an EC2NodeClass).

The walkthrough provisions two nodes for `inflate` (capacity, cost, provisioning latency),
deletes one so it is drained (evictions, node and NodeClaim termination), and then scales `inflate`
to zero so the empty nodes are disrupted (disruption). Gauges of things that exist only while nodes
run are checked while they run; counters of what happened, at the end: a query passes when it
returned a series at either checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Collection, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from karpy.localcluster.process import free_port
from karpy.operator.components import Components
from karpy.runtime.reference import served_metrics
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    no_nodeclaims,
    nodes_gone,
    running,
    running_daemon,
    scale,
)
from tests.support.marks import CHAIN_A
from tests.support.processes import stop
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_A]

KARPENTER_NAMES_PROMTOOL_FLAGS: dict[str, str] = {
    **dict.fromkeys(
        (
            "karpenter_cluster_state_node_count",
            "karpenter_scheduler_unschedulable_pods_count",
            "karpenter_scheduler_ignored_pods_count",
            "operator_node_status_condition_count",
            "operator_nodeclaim_status_condition_count",
            "operator_nodepool_status_condition_count",
        ),
        'should not have "_count" suffix',
    ),
    "karpenter_nodepools_cost_total": 'should not have "_total" suffix',
}
"""Gauges whose Karpenter names end in `_count` or `_total`, which promtool's linter reserves for
histograms, summaries and counters, and its finding on each. karpy keeps Karpenter's names so
dashboards and alerts carry over; every other finding fails the test."""

NOT_WALKED: dict[str, str] = {
    "controller_runtime_reconcile_errors_total": "no reconcile fails in this walkthrough",
    "workqueue_retries_total": "no reconcile fails in this walkthrough",
    "karpenter_cloudprovider_errors_total": "no provider call fails in this walkthrough",
    "karpy_watch_errors_total": "no watch breaks in this walkthrough",
    "karpy_dry_run_decisions_total": "shadow mode: tests/e2e/test_shadow.py",
    "karpy_dry_run_price_per_hour_total": "shadow mode: tests/e2e/test_shadow.py",
    "karpenter_nodeclaims_drifted_total": "drift: tests/cluster/nodeclaim/test_upkeep.py",
    "karpenter_nodeclaims_unhealthy_disrupted_total": (
        "node repair: tests/cluster/health/test_health.py"
    ),
    **dict.fromkeys(
        (
            "operator_nodepool_status_condition_transition_seconds",
            "operator_node_status_condition_transition_seconds",
        ),
        "no condition changes status here, each appears once: "
        "tests/unit/controllers/metrics/test_conditions.py",
    ),
    "operator_nodeclaim_status_condition_transition_seconds": (
        "a status change is timed only when the controller reads the NodeClaim between the two "
        "writes, and a kwok launch can reach Ready before its first read (seen once in CI): "
        "tests/unit/controllers/metrics/test_conditions.py"
    ),
    **dict.fromkeys(
        (
            "operator_nodeclaim_termination_current_time_seconds",
            "operator_node_termination_current_time_seconds",
        ),
        "series only while an object terminates, for under a scrape here: "
        "tests/unit/controllers/metrics/test_conditions.py",
    ),
    "karpenter_pods_provisioning_scheduling_undecided_time_seconds": (
        "a pod waits for its first decision only until the next batch, under a scrape here: "
        "tests/unit/controllers/provisioning/test_decision_latency.py"
    ),
    **dict.fromkeys(
        (
            "karpenter_interruption_received_messages_total",
            "karpenter_interruption_deleted_messages_total",
            "karpenter_interruption_message_queue_duration_seconds",
        ),
        "the AWS interruption queue: tests/e2e/test_observability_aws.py",
    ),
    "karpenter_voluntary_disruption_queue_failures_total": (
        "a rolled-back command: tests/cluster/disruption/test_queue.py"
    ),
    "karpenter_voluntary_disruption_failed_validations_total": (
        "a consolidation command the cluster changed under: "
        "tests/cluster/disruption/test_disruption.py"
    ),
    **dict.fromkeys(
        (
            "karpenter_pods_provisioning_unbound_time_seconds",
            "karpenter_pods_provisioning_unstarted_time_seconds",
        ),
        "a placed pod waits only until its node is up, under a scrape here: "
        "tests/unit/controllers/provisioning/test_decision_latency.py",
    ),
    **dict.fromkeys(
        (
            f"operator_ec2nodeclass_{name}"
            for name in (
                "status_condition_count",
                "status_condition_current_status_seconds",
                "status_condition_transitions_total",
                "status_condition_transition_seconds",
                "termination_duration_seconds",
            )
        ),
        "the AWS provider's NodeClass: tests/e2e/test_observability_aws.py",
    ),
    "operator_ec2nodeclass_termination_current_time_seconds": (
        "a series only while a NodeClass terminates, under a scrape: "
        "tests/unit/controllers/metrics/test_conditions.py"
    ),
    "leader_election_master_status": "leader election is off here: tests/cluster/runtime",
    "karpy_leader_election_transitions_total": "leader election is off here: tests/cluster/runtime",
}
"""Metrics of docs/metrics.md whose scenario this walkthrough does not run, and where it runs."""

WHILE_NODES_RUN = (
    "karpenter_cluster_utilization_percent",
    "operator_node_status_condition_count",
    "operator_node_status_condition_current_status_seconds",
    "operator_nodeclaim_status_condition_count",
    "operator_nodeclaim_status_condition_current_status_seconds",
)
"""Gauges other than the per-node ones that have series only while karpy's nodes exist."""

NODE_EVENTS = (
    "karpenter_nodes_created_total",
    "karpenter_nodes_terminated_total",
    "karpenter_nodes_drained_total",
    "karpenter_nodes_termination_duration_seconds",
    "karpenter_nodes_lifetime_duration_seconds",
)
"""The nodes' counters and histograms, which the drain and scale-in complete."""


def metric_queries() -> list[str]:
    """One query per metric docs/metrics.md names: its series (a histogram's `_count`)."""
    return [
        f"{name}_count" if kind == "histogram" else name
        for name, kind, _ in served_metrics()
        if name not in NOT_WALKED
    ]


DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "karpy-dashboard.json"


def dashboard_queries(not_walked: Collection[str] = NOT_WALKED) -> list[str]:
    """The dashboard's queries, less those that read only metrics `not_walked` names."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    served = {name for name, _, _ in served_metrics()}
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    return [e for e in exprs if not _metrics_of(e, served) <= set(not_walked)]


def _metrics_of(expr: str, served: Collection[str]) -> set[str]:
    """The metrics karpy serves that a query reads (a histogram's by its own name)."""
    tokens = re.findall(r"[a-z][a-z0-9_]*", expr)
    return {
        t
        for t in (*tokens, *(re.sub(r"_(bucket|count|sum)$", "", t) for t in tokens))
        if t in served
    }


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
    """Whether `expr` reads gauges that have series only while nodes run (the per-node
    karpenter_nodes_allocatable, ..., utilization, node and NodeClaim conditions), not the nodes'
    counters and histograms (NODE_EVENTS), which the drain and scale-in complete."""
    if any(name in expr for name in NODE_EVENTS):
        return False
    return "karpenter_nodes_" in expr or any(name in expr for name in WHILE_NODES_RUN)


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
    queries = [*dashboard_queries(), *metric_queries()]
    assert len(queries) >= 10
    pool, labels = await fresh_nodepool(
        api_client, "observe", consolidate_after="1s", limits={"cpu": "1000"}
    )
    inflate = deployment("inflate", node_selector=labels)
    # Limits too, so karpenter_nodes_total_pod_limits has series.
    (container,) = inflate["spec"]["template"]["spec"]["containers"]
    container["resources"]["limits"] = dict(container["resources"]["requests"])
    await create_deployment(api_client, namespace, inflate)
    # A DaemonSet on the pool's nodes, so the nodes' daemon requests and limits have series.
    agent = deployment("agent", node_selector=labels, cpu="10m", memory="16Mi")
    agent["kind"] = "DaemonSet"
    agent["spec"].pop("replicas")
    agent["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    (agent_container,) = agent["spec"]["template"]["spec"]["containers"]
    agent_container["resources"]["limits"] = dict(agent_container["resources"]["requests"])
    await client.AppsV1Api(api_client).create_namespaced_daemon_set(namespace, agent)  # type: ignore[arg-type]
    # A pod no NodePool can take stays unbound and unstarted, so the waiting-pod gauges have
    # series however quickly the walkthrough's own pods are placed.
    stuck = deployment("stuck", node_selector={"karpy.test/nowhere": "true"}, replicas=1)
    await create_deployment(api_client, namespace, stuck)
    answered: set[str] = set()

    async with (
        running_daemon(cluster_info) as components,
        scraped(components, tmp_path) as base,
    ):
        await scale(api_client, namespace, "inflate", 2)
        await eventually(running(api_client, namespace, "inflate", 2), within=90)

        async def costed() -> list[dict[str, Any]]:
            return await query(base, f'karpenter_nodepools_cost_total{{nodepool="{pool}"}}')

        (cost,) = await eventually(costed, within=90, what="the NodePool's cost scraped")
        assert float(cost["value"][1]) > 0

        async def nodes_answered() -> bool:
            # Queries over the nodes' gauges have series only while the nodes run: wait for a
            # scrape that has them before the scale-in takes the nodes away.
            answered.update([q for q in queries if q not in answered and await query(base, q)])
            return all(q in answered for q in queries if _over_node_gauges(q))

        try:
            await eventually(nodes_answered, within=60, what="the node queries answered")
        except AssertionError as error:
            missing = [q for q in queries if _over_node_gauges(q) and q not in answered]
            raise AssertionError(f"node queries with no series: {missing}") from error

        exposition = await asyncio.to_thread(
            _get, f"http://127.0.0.1:{components.probes.metrics_port}/metrics"
        )
        checked = promtool_check(exposition)
        output = checked.stdout + checked.stderr  # promtool prints its findings on stderr
        findings = [line for line in output.splitlines() if line.strip()]
        unexpected = [
            line
            for line in findings
            if KARPENTER_NAMES_PROMTOOL_FLAGS.get(line.split(" ", 1)[0], "\0") not in line
        ]
        assert checked.returncode == 0 or (findings and not unexpected), (
            checked.stdout + checked.stderr
        )
        assert not unexpected, unexpected

        # A drain: one node deleted, its pod evicted and run again elsewhere.
        core = client.CoreV1Api(api_client)
        pods = await eventually(running(api_client, namespace, "inflate", 2), within=30)
        victim = pods[0].spec.node_name
        await core.delete_node(victim)
        await eventually(lambda: nodes_gone(api_client, [victim]), within=90, what="the drain")
        await eventually(running(api_client, namespace, "inflate", 2), within=90)

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
