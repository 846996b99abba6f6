"""A DaemonSet's pods are part of every new node's load: karpy sizes the node for them too.

The DaemonSet selects the NodePool's nodes, so kube's DaemonSet controller will put one of its
pods on each node karpy launches. karpy informs DaemonSets and counts their requests as the
NodePool's overhead; a node sized for the app pod alone (1 cpu) would leave the DaemonSet pod
(1 cpu more) pending on it.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.core.resources import CPU, parse_resource
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    PAUSE_IMAGE,
    create_deployment,
    deployment,
    fresh_nodepool,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


def _daemonset(name: str, node_selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": node_selector,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "agent",
                            "image": PAUSE_IMAGE,
                            "resources": {"requests": {"cpu": "1", "memory": "512Mi"}},
                        }
                    ],
                },
            },
        },
    }


async def test_a_new_node_has_room_for_the_daemonset_pods_that_will_land_on_it(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await fresh_nodepool(api_client, "ds")
    apps = client.AppsV1Api(api_client)
    await apps.create_namespaced_daemon_set(namespace, _daemonset("agent", labels))  # type: ignore[arg-type]
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=labels))

    async with running_daemon(cluster_info):
        await scale(api_client, namespace, "inflate", 1)
        (pod,) = await eventually(running(api_client, namespace, "inflate", 1), within=60)
        # The DaemonSet's pod runs beside it on the same new node.
        (agent,) = await eventually(running(api_client, namespace, "agent", 1), within=60)
        assert agent.spec.node_name == pod.spec.node_name
        (claim,) = await nodeclaims(api_client, pool)
        requests = claim["spec"]["resources"]["requests"]
        # 1 cpu for inflate and 1 cpu of DaemonSet overhead.
        assert parse_resource(CPU, requests[CPU]) >= 2000
        # ... and that NodeClaim's node is where both pods run.
        node = await client.CoreV1Api(api_client).read_node(pod.spec.node_name)
        assert node.metadata.labels[wk.LABEL_NODEPOOL] == pool
