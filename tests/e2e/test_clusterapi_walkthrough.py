"""The inflate walkthrough on the Cluster API provider, against Cluster API's real controllers.

The daemon runs with ``--provider clusterapi`` on the local control plane, where Cluster API's core
manager and the testbed infrastructure run too (tests/support/clusterapi.py). Its
ClusterAPINodeClass selects two MachineDeployments of different shapes and prices: ``small``
(2 vCPU, 8 GiB, $0.096/h from the per-vCPU and per-GiB defaults) and ``large`` (8 vCPU, 32 GiB,
annotated $0.20/h), which already runs one Machine of the operator's own. ``inflate`` pods
request 1.5 vCPU, so one fits a small machine and five a large one.

0 -> 1: the cheapest fitting MachineDeployment, small, grows by one and karpy claims its new
Machine. small is then capped at its size (max-size annotation), so 1 -> 6 sends karpy to large,
which grows by one Machine holding the other five pods. 6 -> 0: the empty nodes go after
consolidateAfter, each MachineDeployment shrinks by exactly karpy's Machines, and the operator's
own Machine on large is still there.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    is_ready,
    no_nodeclaims,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support import clusterapi as capi
from tests.support.marks import TOOLS
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds", "clusterapi"),
    *TOOLS,
    pytest.mark.xdist_group("clusterapi"),
]

CLAIMED = "karpenter.cluster.x-k8s.io/nodeclaim"
MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"


@pytest.fixture
def fleet(clusterapi: capi.ClusterAPIEnv) -> Iterator[str]:
    """The two MachineDeployments, in a namespace of their own; large runs one Machine of the
    operator's (not karpy's) before karpy starts."""
    name = f"capi-{secrets.token_hex(3)}"
    kube = clusterapi.kube
    capi.fleet(kube, name)
    kube.merge_patch(
        f"{capi.CAPI}/namespaces/{name}/machinedeployments/large", {"spec": {"replicas": 1}}
    )
    yield name
    capi.remove_fleet(kube, name)


def _machines(env: capi.ClusterAPIEnv, fleet: str) -> list[dict[str, Any]]:
    return capi.machines(env.kube, fleet)


def _replicas(env: capi.ClusterAPIEnv, fleet: str, md: str) -> int:
    found = env.kube.get(f"{capi.CAPI}/namespaces/{fleet}/machinedeployments/{md}")
    return int(found["spec"]["replicas"])


def _deployment_of(machine: dict[str, Any]) -> str:
    return str(machine["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"])


async def test_inflate_grows_and_shrinks_the_cheapest_machinedeployments(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    clusterapi: capi.ClusterAPIEnv,
    fleet: str,
) -> None:
    kube = clusterapi.kube
    custom = client.CustomObjectsApi(api_client)
    intent = f"apps-{secrets.token_hex(3)}"

    async def operators_machine() -> list[dict[str, Any]]:
        return [m for m in _machines(clusterapi, fleet) if m["spec"].get("providerID")]

    (own,) = await eventually(operators_machine, within=60, what="the operator's Machine")
    capi.nodeclass(kube, fleet)
    await custom.create_cluster_custom_object(
        wk.GROUP, "v1", "nodepools", capi.nodepool(fleet, intent)
    )
    await create_deployment(
        api_client,
        namespace,
        deployment("inflate", node_selector={"intent": intent}, cpu="1.5", memory="1.5Gi"),
    )

    async def claimed() -> list[dict[str, Any]]:
        return [m for m in _machines(clusterapi, fleet) if CLAIMED in m["metadata"]["labels"]]

    async def all_ready(count: int) -> list[dict[str, Any]]:
        found = await nodeclaims(api_client, fleet)
        return found if len(found) == count and all(is_ready(c) for c in found) else []

    async def nodeclass_ready() -> bool:
        found = await custom.get_cluster_custom_object(
            "karpenter.cluster.x-k8s.io", "v1alpha1", "clusterapinodeclasses", fleet
        )
        return is_ready(found)

    flags = ["--provider", "clusterapi", "--provider-setting", f"namespace={fleet}"]
    async with running_daemon(cluster_info, flags=flags):
        await eventually(nodeclass_ready, within=60, what="the ClusterAPINodeClass Ready")

        # 0 -> 1: small is the cheapest that fits.
        await scale(api_client, namespace, "inflate", 1)
        await eventually(running(api_client, namespace, "inflate", 1), within=120)
        (first,) = await eventually(lambda: all_ready(1), within=60)
        assert first["metadata"]["labels"][wk.LABEL_INSTANCE_TYPE] == "small"
        assert first["metadata"]["labels"][wk.LABEL_TOPOLOGY_ZONE] == "zone-a"
        (machine,) = await claimed()
        assert _deployment_of(machine) == "small"
        assert machine["spec"]["providerID"] == first["status"]["providerID"]
        assert _replicas(clusterapi, fleet, "small") == 1

        # small at its max size: 1 -> 6 goes to large.
        kube.merge_patch(
            f"{capi.CAPI}/namespaces/{fleet}/machinedeployments/small",
            {"metadata": {"annotations": {MAX_SIZE: "1"}}},
        )
        await scale(api_client, namespace, "inflate", 6)
        await eventually(running(api_client, namespace, "inflate", 6), within=180)
        ready = await eventually(lambda: all_ready(2), within=60)
        types = sorted(c["metadata"]["labels"][wk.LABEL_INSTANCE_TYPE] for c in ready)
        assert types == ["large", "small"]
        karpys = await claimed()
        assert sorted(_deployment_of(m) for m in karpys) == ["large", "small"]
        assert {m["spec"]["providerID"] for m in karpys} == {
            c["status"]["providerID"] for c in ready
        }
        assert _replicas(clusterapi, fleet, "small") == 1
        assert _replicas(clusterapi, fleet, "large") == 2

        # 6 -> 0: exactly karpy's Machines go.
        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_nodeclaims(api_client, fleet), within=180)

        async def only_the_operators() -> bool:
            names = [m["metadata"]["name"] for m in _machines(clusterapi, fleet)]
            return names == [own["metadata"]["name"]]

        await eventually(only_the_operators, within=120, what="karpy's Machines gone")
        assert _replicas(clusterapi, fleet, "small") == 0
        assert _replicas(clusterapi, fleet, "large") == 1
        annotations = kube.get(f"{capi.CAPI}/namespaces/{fleet}/machinedeployments/large")[
            "metadata"
        ].get("annotations", {})
        records = ("karpenter.cluster.x-k8s.io/scale-up-", "karpenter.cluster.x-k8s.io/release-")
        assert not [k for k in annotations if k.startswith(records)]
        await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", fleet)
