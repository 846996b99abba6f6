"""The daemon with the kwok provider keeps nodes fresh: an expired node is replaced and its pods
run on the new one; a NotReady node is repaired (NodeRepair gate, a shortened toleration); a
template label change marks the pool's NodeClaims Drifted; NodePool status follows its nodes."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.runtime.clock import SystemClock
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    node_names,
    nodeclaims,
    running,
    running_daemon,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


async def _patch_pool(api: client.ApiClient, name: str, patch: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        wk.GROUP, "v1", "nodepools", name, patch, _content_type="application/merge-patch+json"
    )


async def _pool(api: client.ApiClient, name: str) -> dict[str, Any]:
    pool: dict[str, Any] = await client.CustomObjectsApi(api).get_cluster_custom_object(
        wk.GROUP, "v1", "nodepools", name
    )
    return pool


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


async def test_an_expired_node_is_replaced_and_its_pods_run_on_the_new_node(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await fresh_nodepool(api_client, "expire")
    await _patch_pool(api_client, pool, {"spec": {"template": {"spec": {"expireAfter": "30s"}}}})
    await create_deployment(
        api_client, namespace, deployment("aging", node_selector=labels, replicas=2)
    )
    async with running_daemon(cluster_info):
        first = await eventually(running(api_client, namespace, "aging", 2), within=60)
        old_nodes = {p.spec.node_name for p in first}

        async def moved() -> list[Any]:
            pods = await running(api_client, namespace, "aging", 2)()
            fresh = [p for p in pods if p.spec.node_name not in old_nodes]
            gone = not (old_nodes & await node_names(api_client))
            return fresh if len(fresh) == 2 and gone else []

        await eventually(moved, within=120, what="pods running on a replacement node")


async def test_a_not_ready_node_is_repaired_after_the_toleration(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "repair")
    await create_deployment(
        api_client, namespace, deployment("patient", node_selector=labels, replicas=1)
    )
    flags = ["--feature-gates", "NodeRepair=true", "--node-repair-toleration", "5s"]
    async with running_daemon(cluster_info, flags=flags) as components:
        (pod,) = await eventually(running(api_client, namespace, "patient", 1), within=60)
        sick = pod.spec.node_name
        now = SystemClock().now().strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "container runtime is down",
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }
        # The kubelet (kwok) stops: kwok no longer manages the node, so nothing resets Ready.
        await core.patch_node(sick, {"metadata": {"annotations": {wk.ANNOTATION_KWOK_NODE: None}}})
        await core.patch_node_status(sick, {"status": {"conditions": [condition]}})

        async def repaired() -> list[Any]:
            pods = await running(api_client, namespace, "patient", 1)()
            moved = [p for p in pods if p.spec.node_name != sick]
            return moved if moved and sick not in await node_names(api_client) else []

        # Repair after 5 s; the pod, deleted on a node no kubelet serves, is stuck terminating and
        # stops holding the drain a minute after its 30 s grace period.
        await eventually(repaired, within=180, what="the pod running on a repaired node")
        text = components.telemetry.prometheus_text()
        assert f'condition="Ready",nodepool="{pool}"' in text
        assert 'reason="unhealthy"' in text


async def test_a_template_label_change_marks_the_nodeclaims_drifted(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await fresh_nodepool(api_client, "drift")
    await create_deployment(
        api_client, namespace, deployment("steady", node_selector=labels, replicas=1)
    )
    async with running_daemon(cluster_info):
        await eventually(running(api_client, namespace, "steady", 1), within=60)

        async def status_counted() -> bool:
            stored = await _pool(api_client, pool)
            ready = _condition(stored, "Ready")
            return (
                stored.get("status", {}).get("nodes") == 1
                and ready is not None
                and ready["status"] == "True"
            )

        await eventually(status_counted, within=30, what="NodePool status with 1 node, Ready")
        (claim,) = await nodeclaims(api_client, pool)
        stored = await _pool(api_client, pool)
        annotations = stored["metadata"]["annotations"]
        assert annotations[wk.ANNOTATION_NODEPOOL_HASH_VERSION] == "karpy-v1"
        assert (
            claim["metadata"]["annotations"][wk.ANNOTATION_NODEPOOL_HASH]
            == annotations[wk.ANNOTATION_NODEPOOL_HASH]
        )
        assert _condition(claim, "Drifted") is None

        await _patch_pool(
            api_client,
            pool,
            {"spec": {"template": {"metadata": {"labels": {**labels, "rollout": "two"}}}}},
        )

        async def drifted() -> dict[str, Any] | None:
            (current,) = await nodeclaims(api_client, pool)
            return _condition(current, "Drifted")

        condition = await eventually(drifted, within=30, what="the Drifted condition")
        assert (condition["status"], condition["reason"]) == ("True", "NodePoolDrifted")
