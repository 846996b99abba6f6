"""Shadow mode and the cluster snapshot, on the local cluster with the kwok provider.

`--dry-run`: seed 000's `inflate` goes pending for a NodePool; karpy decides to launch, but no
NodeClaim is created and no pod moves; the NodePool gets a DryRunLaunch event naming the
instance types and the $/h, and the decisions show in the metrics with their price.
`simulate --from-cluster`: the same pending pods, snapshotted before karpy runs, plan the same
number of NodeClaims for the same NodePool as the live daemon then launches.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from karpy.core.scheduling import solve
from karpy.localcluster import ClusterInfo
from karpy.operator.snapshot import snapshot
from karpy.runtime.options import load
from karpy.simulate.scenario import parse
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    live_pods,
    no_nodeclaims,
    nodeclaims,
    running,
    running_daemon,
    scale,
    steadily,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


async def _events(api: client.ApiClient, reason: str, name: str) -> list[Any]:
    listed = await client.CoreV1Api(api).list_namespaced_event("default")
    return [e for e in listed.items if e.reason == reason and e.involved_object.name == name]


async def test_dry_run_decides_and_writes_nothing(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    name, selector = await fresh_nodepool(api_client, "shadow")
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=selector))
    await scale(api_client, namespace, "inflate", 3)
    async with running_daemon(cluster_info, flags=["--dry-run"]) as components:
        events = await eventually(lambda: _events(api_client, "DryRunLaunch", name), within=60)
        message = events[0].message
        assert message.startswith("dry run: would launch NodeClaim")
        assert "$/h" in message
        assert "instance types" in message
        await steadily(lambda: no_nodeclaims(api_client, name), during=5.0)
        pods = await live_pods(api_client, namespace, "inflate")
        assert len(pods) == 3
        assert all(p.spec.node_name is None for p in pods)
        metrics = components.telemetry.prometheus_text()
        assert 'karpy_dry_run_decisions_total{action="launch",kind="NodeClaim"}' in metrics
        assert "karpy_dry_run_price_per_hour_USD_per_h_total" in metrics or (
            "karpy_dry_run_price_per_hour" in metrics
        )


async def test_snapshot_plans_what_the_daemon_launches(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    name, selector = await fresh_nodepool(api_client, "snap")
    await create_deployment(
        api_client, namespace, deployment("inflate", node_selector=selector, replicas=6)
    )

    async def pending() -> list[Any]:
        pods = await live_pods(api_client, namespace, "inflate")
        unschedulable = [
            p
            for p in pods
            if any(
                c.type == "PodScheduled" and c.reason == "Unschedulable"
                for c in p.status.conditions or []
            )
        ]
        return unschedulable if len(unschedulable) == 6 else []

    await eventually(pending, within=60)
    options = load(["--kubeconfig", str(cluster_info.kubeconfig)], {})
    document = await asyncio.wait_for(snapshot(options), 120)
    text = yaml.safe_dump(document)  # what the file holds
    scenario = parse(yaml.safe_load(text))
    ours = [p for p in scenario.pods if p.key.startswith(f"{namespace}/")]
    assert len(ours) == 6
    plan = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    planned = [c for c in plan.nodeclaims if c.nodepool == name]
    assert planned
    async with running_daemon(cluster_info):
        await eventually(running(api_client, namespace, "inflate", 6), within=180)
        launched = await nodeclaims(api_client, name)
    assert len(launched) == len(planned)
