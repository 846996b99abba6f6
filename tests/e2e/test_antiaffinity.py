"""A hostname anti-affinity group spreads over new nodes, one pod on each.

Required podAntiAffinity on kubernetes.io/hostname forbids two of the group's pods on one node,
so although one instance type could hold them all, the scheduler must plan one NodeClaim per
pod; kube-scheduler then binds each pod to its own new kwok node.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    is_ready,
    node_names,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

REPLICAS = 3


async def test_hostname_anti_affinity_puts_each_pod_on_its_own_new_node(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "anti")
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "apart"}},
                    "topologyKey": wk.LABEL_HOSTNAME,
                }
            ]
        }
    }
    # Small pods: without the anti-affinity one node would take all of them.
    body = deployment("apart", node_selector=labels, cpu="100m", memory="128Mi", affinity=apart)
    await create_deployment(api_client, namespace, body)
    before = await node_names(api_client)

    async with running_daemon(cluster_info):
        await scale(api_client, namespace, "apart", REPLICAS)
        pods = await eventually(running(api_client, namespace, "apart", REPLICAS), within=60)
        nodes = {p.spec.node_name for p in pods}
        assert len(nodes) == REPLICAS
        assert not nodes & before
        for name in nodes:
            node = await core.read_node(name)
            assert node.metadata.labels[wk.LABEL_NODEPOOL] == pool

        async def ready_claims() -> list[dict[str, Any]]:
            claims = await nodeclaims(api_client, pool)
            return claims if all(is_ready(c) for c in claims) else []

        claims = await eventually(ready_claims, within=30)
        assert len(claims) == REPLICAS
        assert {c["status"]["nodeName"] for c in claims} == nodes
