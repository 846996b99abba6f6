"""Several NodePools: the heaviest one that fits is used, and its limits push the rest elsewhere.

Two NodePools offer the same nodes; the scheduler tries NodePools by descending weight, so the
first pod lands on the heavy one. Then the heavy NodePool gets a cpu limit that leaves room for
at most one more small node, and the Deployment grows: the replicas that do not fit under the
limit overflow to the light NodePool, and at no point does the heavy NodePool's NodeClaims'
summed cpu capacity exceed its limit (limits charge capacity, as in Karpenter).
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.core.resources import CPU, MILLI
from karpy.kube.kinds import NODEPOOLS
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    cpu_capacity,
    create_deployment,
    create_nodepool,
    deployment,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

REPLICAS = 5
HEADROOM = 2 * MILLI
"""cpu (millicores) the heavy NodePool may grow by after its first node: one 2-cpu node."""


async def test_heavier_nodepool_first_and_its_cpu_limit_overflows_to_the_lighter(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    suffix = secrets.token_hex(3)
    heavy, light = f"heavy-{suffix}", f"light-{suffix}"
    labels = {"intent": f"apps-{suffix}"}
    await create_nodepool(api_client, light, labels=labels, weight=10)
    await create_nodepool(api_client, heavy, labels=labels, weight=50)
    await create_deployment(api_client, namespace, deployment("spill", node_selector=labels))

    async with running_daemon(cluster_info) as components:
        await scale(api_client, namespace, "spill", 1)
        (pod,) = await eventually(running(api_client, namespace, "spill", 1), within=60)
        node = await core.read_node(pod.spec.node_name)
        assert node.metadata.labels[wk.LABEL_NODEPOOL] == heavy
        assert len(await nodeclaims(api_client, heavy)) == 1
        assert not await nodeclaims(api_client, light)

        limit = cpu_capacity(await nodeclaims(api_client, heavy)) + HEADROOM
        await custom.patch_cluster_custom_object(
            wk.GROUP,
            "v1",
            "nodepools",
            heavy,
            [{"op": "add", "path": "/spec/limits", "value": {CPU: f"{limit}m"}}],
        )
        pools = components.state.store(NODEPOOLS)

        async def limit_seen() -> bool:
            seen = pools.get(heavy)
            return seen is not None and CPU in seen.spec.limits

        await eventually(limit_seen, within=30)
        await scale(api_client, namespace, "spill", REPLICAS)

        async def all_running_within_limit() -> list[Any]:
            used = cpu_capacity(await nodeclaims(api_client, heavy))
            assert used <= limit, f"{heavy} has {used}m cpu of NodeClaims, over its {limit}m limit"
            return await running(api_client, namespace, "spill", REPLICAS)()

        pods = await eventually(all_running_within_limit, within=90)
        assert cpu_capacity(await nodeclaims(api_client, heavy)) <= limit
        assert await nodeclaims(api_client, light)
        placed: dict[str, int] = {}
        for p in pods:
            pool = (await core.read_node(p.spec.node_name)).metadata.labels[wk.LABEL_NODEPOOL]
            placed[pool] = placed.get(pool, 0) + 1
        assert set(placed) == {heavy, light}
