"""Shadow mode and the cluster snapshot, on the local cluster with the kwok provider.

`--dry-run`: seed 000's `inflate` goes pending for a NodePool; karpy decides to launch, but no
NodeClaim is created and no pod moves; the NodePool gets a DryRunLaunch event naming the
instance types and the $/h, and the decisions show in the metrics with their price.
`simulate --from-cluster`: the same pending pods, snapshotted before karpy runs, plan the same
number of NodeClaims for the same NodePool as the live daemon then launches; the snapshot keeps
a PodDisruptionBudget, a pod's do-not-disrupt annotation (and no other) and the snapshot time,
and they read back.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.core.scheduling import solve
from karpy.localcluster import ClusterInfo
from karpy.operator.snapshot import snapshot
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import load
from karpy.simulate.scenario import parse
from tests.e2e.daemon import (
    PAUSE_IMAGE,
    create_deployment,
    create_pdb,
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


async def _protection(api: client.ApiClient, namespace: str) -> None:
    """A PDB over `inflate`, and a pod annotated do-not-disrupt for 30 minutes (beside an
    annotation the snapshot leaves out) that no NodePool can take."""
    await create_pdb(api, namespace, "inflate", min_available=4)
    await client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {  # type: ignore[arg-type]
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "held",
                "annotations": {wk.ANNOTATION_DO_NOT_DISRUPT: "30m", "team": "reports"},
            },
            "spec": {
                "nodeSelector": {"karpy.test/nowhere": "true"},
                "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
            },
        },
    )

    async def unschedulable() -> bool:
        pod = await client.CoreV1Api(api).read_namespaced_pod("held", namespace)
        return any(
            c.type == "PodScheduled" and c.reason == "Unschedulable"
            for c in pod.status.conditions or []
        )

    await eventually(unschedulable, within=60)


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
    await _protection(api_client, namespace)
    options = load(["--kubeconfig", str(cluster_info.kubeconfig)], {})
    clock = SystemClock()
    before = clock.now().replace(microsecond=0)
    document = await asyncio.wait_for(snapshot(options), 120)
    after = clock.now()
    await client.CoreV1Api(api_client).delete_namespaced_pod("held", namespace)
    text = yaml.safe_dump(document)  # what the file holds
    scenario = parse(yaml.safe_load(text))
    ours = [p for p in scenario.pods if p.key.startswith(f"{namespace}/inflate")]
    assert len(ours) == 6

    assert before.timestamp() <= scenario.now <= after.timestamp()
    (held,) = [p for p in document["pods"] if p["namespace"] == namespace and p["name"] == "held"]
    assert held["annotations"] == {wk.ANNOTATION_DO_NOT_DISRUPT: "30m"}
    assert datetime.fromisoformat(held["startTime"]) <= after
    pdbs = [p for p in document["podDisruptionBudgets"] if p["namespace"] == namespace]
    assert pdbs == [
        {
            "name": "inflate",
            "namespace": namespace,
            "selector": {"matchLabels": {"app": "inflate"}},
            "minAvailable": 4,
        }
    ]
    (pdb,) = [p for p in scenario.protection.pdbs if p.metadata.namespace == namespace]
    assert pdb.metadata.name == "inflate"
    assert pdb.spec.min_available == 4
    plan = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    planned = [c for c in plan.nodeclaims if c.nodepool == name]
    assert planned
    async with running_daemon(cluster_info):
        await eventually(running(api_client, namespace, "inflate", 6), within=180)
        launched = await nodeclaims(api_client, name)
    assert len(launched) == len(planned)
