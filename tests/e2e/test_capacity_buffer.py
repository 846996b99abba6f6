"""CapacityBuffers with the whole daemon on the local cluster (kwok provider,
FEATURE_GATES=CapacityBuffer=true): a buffer of two chunks gets its status written as Cluster
Autoscaler writes it and a node launched for its room with no pod created; the node survives
consolidation although it holds no real pod (consolidateAfter 0s); a real pod of the chunk's
size is bound by kube-scheduler into that room at once, on the node that was already there, and
the room it took is launched again; a buffer sized as a percentage of a Deployment resolves from
the Deployment's template and replicas.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.autoscaling.capacitybuffer import ACTIVE_CAPACITY, GROUP
from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    PAUSE_IMAGE,
    create_deployment,
    deployment,
    fresh_nodepool,
    is_ready,
    nodeclaims,
    running,
    running_daemon,
    steadily,
)
from tests.support.waiting import eventually

# Waits on states, never on time, so it runs beside other tests, outside the chains of heavy tests.
pytestmark = [pytest.mark.usefixtures("karpy_crds")]

GATES = {"FEATURE_GATES": "CapacityBuffer=true"}
FLAGS = ("--consolidation-validation-delay", "1s")
CHUNK_CPU = "1500m"  # two chunks fill a c5.xlarge (4 vCPU); a third needs another node


async def _consolidating_pool(api: client.ApiClient) -> tuple[str, dict[str, str]]:
    """On-demand c5.xlarge nodes that consolidate as soon as they are empty or underused."""
    pool, labels = await fresh_nodepool(api, "buffer")
    requirements = [
        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
        {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["c5.xlarge"]},
        {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": [wk.CAPACITY_TYPE_ON_DEMAND]},
    ]
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        pool,
        {
            "spec": {
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "0s",
                },
                "template": {"spec": {"requirements": requirements}},
            }
        },
        _content_type="application/merge-patch+json",
    )
    return pool, labels


def _pod_spec(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "nodeSelector": labels,
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": CHUNK_CPU, "memory": "1Gi"}},
            }
        ],
    }


async def _create_buffer(api: client.ApiClient, namespace: str, name: str, spec: Any) -> None:
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        "v1alpha1",
        namespace,
        "capacitybuffers",
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "CapacityBuffer",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


async def _buffer(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, "v1alpha1", namespace, "capacitybuffers", name
    )
    return got


def _conditions(buffer: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c["reason"])
        for c in buffer.get("status", {}).get("conditions", [])
    }


async def _live_claims(api: client.ApiClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await nodeclaims(api, pool) if not c["metadata"].get("deletionTimestamp")]


async def test_a_buffer_keeps_room_free_through_consolidation_and_a_real_pod_takes_it(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await _consolidating_pool(api_client)
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_pod_template(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "chunk"},
            "template": {"metadata": {"labels": {"app": "chunk"}}, "spec": _pod_spec(labels)},
        },  # type: ignore[arg-type]
    )
    await _create_buffer(
        api_client, namespace, "headroom", {"podTemplateRef": {"name": "chunk"}, "replicas": 2}
    )
    async with running_daemon(cluster_info, flags=FLAGS, environ=GATES):

        async def resolved() -> dict[str, Any] | None:
            buffer = await _buffer(api_client, namespace, "headroom")
            ready = _conditions(buffer).get("ReadyForProvisioning") == ("True", "Resolved")
            return buffer if ready and buffer["status"].get("replicas") == 2 else None

        buffer = await eventually(resolved, within=60, what="the buffer's status")
        status = buffer["status"]
        assert status["podTemplateRef"] == {"name": "chunk"}
        assert status["podTemplateGeneration"] >= 0
        assert status["provisioningStrategy"] == ACTIVE_CAPACITY
        assert _conditions(buffer)["Provisioning"] == ("True", "FakePodsInjected")

        async def one_ready_node() -> str | None:
            claims = await _live_claims(api_client, pool)
            if len(claims) == 1 and is_ready(claims[0]):
                return str(claims[0]["status"]["nodeName"])
            return None

        node = await eventually(one_ready_node, within=120, interval=0.5, what="buffer's node")
        assert (await core.list_namespaced_pod(namespace)).items == [], "no pod is created"

        async def kept() -> bool:
            return await one_ready_node() == node

        # Empty of real pods and consolidateAfter 0s: only the buffer keeps it.
        await steadily(kept, during=20)
        assert (await core.list_namespaced_pod(namespace)).items == []

        await create_deployment(
            api_client,
            namespace,
            deployment("real", node_selector=labels, replicas=1, cpu=CHUNK_CPU, memory="1Gi"),
        )
        pods = await eventually(running(api_client, namespace, "real", 1), within=60)
        assert pods[0].spec.node_name == node, "bound into the buffer's room, no launch"
        scheduled = [c for c in pods[0].status.conditions or [] if c.type == "PodScheduled"]
        assert [c.status for c in scheduled] == ["True"]

        async def room_again() -> bool:
            claims = await _live_claims(api_client, pool)
            return len(claims) == 2 and all(is_ready(c) for c in claims)

        # The chunk the real pod displaced gets its room on a new node.
        await eventually(room_again, within=120, interval=0.5, what="the room launched again")

        await _create_buffer(
            api_client,
            namespace,
            "share",
            {
                "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "real"},
                "percentage": 50,
            },
        )

        async def share_resolved() -> dict[str, Any] | None:
            share = await _buffer(api_client, namespace, "share")
            ready = _conditions(share).get("ReadyForProvisioning") == ("True", "Resolved")
            return share if ready else None

        share = await eventually(share_resolved, within=60, what="the share buffer's status")
        assert share["status"]["replicas"] == 1  # 50% of one replica, rounded up
        assert "podTemplateRef" not in share["status"]
