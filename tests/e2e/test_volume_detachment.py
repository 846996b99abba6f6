"""A drained node's instance waits for its volumes to detach, with karpy running as `karpy run`.

A Deployment's pod runs on a karpy node that also has a CSI volume attached (a CSIDriver, a
PersistentVolume and its VolumeAttachment, which the test holds with a finalizer of its own, as
a CSI attacher holds it until the volume is detached). `kubectl delete node` drains the pod to a
new node, but the drained node stays, its NodeClaim `VolumesDetached=Unknown`
(`AwaitingVolumeDetachment`), for as long as the attachment does; once the attachment is
deleted the instance, the NodeClaim and the Node go. Under a terminationGracePeriod an
attachment that never goes holds the node only until the deadline. The VolumeAttachment reaches
termination through its informer and its watch, as every kind karpy reads.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    claim_recording,
    create_deployment,
    deployment,
    fresh_nodepool,
    node_names,
    nodeclaims,
    running,
    running_daemon,
    steadily,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

HOLD: Final = "example.com/hold"
HELD: Final = 5.0
"""Seconds the drained node is watched while its volume stays attached."""
GRACE: Final = 20.0
"""The NodePool's terminationGracePeriod where the attachment is never released."""


def _attach(kube_http: KubeHTTP, name: str, node: str) -> list[str]:
    """A CSIDriver, a PersistentVolume and its VolumeAttachment to `node` held by HOLD, all
    called `name`; their paths, the attachment's first."""
    driver = f"{name}.csi.example.com"
    objects: list[tuple[str, dict[str, Any]]] = [
        (
            "/apis/storage.k8s.io/v1/volumeattachments",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttachment",
                "metadata": {"name": name, "finalizers": [HOLD]},
                "spec": {
                    "attacher": driver,
                    "nodeName": node,
                    "source": {"persistentVolumeName": name},
                },
            },
        ),
        (
            "/api/v1/persistentvolumes",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "csi": {"driver": driver, "volumeHandle": f"vol-{name}"},
                },
            },
        ),
        (
            "/apis/storage.k8s.io/v1/csidrivers",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": driver},
                "spec": {"attachRequired": True},
            },
        ),
    ]
    paths = []
    for collection, body in objects:
        kube_http.request("POST", collection, body)
        paths.append(f"{collection}/{body['metadata']['name']}")
    return paths


async def test_a_drained_node_stays_until_its_volume_attachment_goes(
    cluster_info: ClusterInfo, api_client: client.ApiClient, kube_http: KubeHTTP, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "vol")
    await create_deployment(
        api_client, namespace, deployment("stateful", node_selector=labels, replicas=1)
    )
    created: list[str] = []
    try:
        async with running_daemon(cluster_info):
            (pod,) = await eventually(running(api_client, namespace, "stateful", 1), within=60)
            node_name = pod.spec.node_name
            claim = await claim_recording(api_client, pool, node_name)
            created = _attach(kube_http, f"vol-{pool}", node_name)
            await core.delete_node(node_name)

            async def moved() -> list[Any]:
                live = await running(api_client, namespace, "stateful", 1)()
                return [p for p in live if p.spec.node_name != node_name]

            await eventually(moved, within=60)

            async def awaiting_detachment() -> bool:
                (current,) = [
                    c
                    for c in await nodeclaims(api_client, pool)
                    if c["metadata"]["name"] == claim["metadata"]["name"]
                ]
                return any(
                    (c["type"], c["status"], c.get("reason"))
                    == ("VolumesDetached", "Unknown", "AwaitingVolumeDetachment")
                    for c in current.get("status", {}).get("conditions", [])
                )

            await eventually(awaiting_detachment, within=30)

            async def node_stays() -> bool:
                return node_name in await node_names(api_client)

            await steadily(node_stays, during=HELD)

            attachment = created[0]
            kube_http.merge_patch(attachment, {"metadata": {"finalizers": None}})
            kube_http.delete(attachment)

            async def released() -> bool:
                names = {c["metadata"]["name"] for c in await nodeclaims(api_client, pool)}
                return node_name not in await node_names(api_client) and (
                    claim["metadata"]["name"] not in names
                )

            await eventually(released, within=60)
    finally:
        for path in created:
            kube_http.force_delete(path)


async def test_a_volume_attachment_that_never_goes_holds_the_node_only_until_the_deadline(
    cluster_info: ClusterInfo, api_client: client.ApiClient, kube_http: KubeHTTP, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(
        api_client, "voldl", termination_grace_period=f"{GRACE:.0f}s"
    )
    await create_deployment(
        api_client, namespace, deployment("stateful", node_selector=labels, replicas=1)
    )
    created: list[str] = []
    try:
        async with running_daemon(cluster_info):
            (pod,) = await eventually(running(api_client, namespace, "stateful", 1), within=60)
            node_name = pod.spec.node_name
            claim = await claim_recording(api_client, pool, node_name)
            created = _attach(kube_http, f"vol-{pool}", node_name)
            await core.delete_node(node_name)

            async def awaiting_detachment() -> bool:
                return any(
                    (c["type"], c["status"], c.get("reason"))
                    == ("VolumesDetached", "Unknown", "AwaitingVolumeDetachment")
                    for current in await nodeclaims(api_client, pool)
                    if current["metadata"]["name"] == claim["metadata"]["name"]
                    for c in current.get("status", {}).get("conditions", [])
                )

            await eventually(awaiting_detachment, within=30)

            # The attachment is never released: the node goes once the grace period is over.
            async def released() -> bool:
                names = {c["metadata"]["name"] for c in await nodeclaims(api_client, pool)}
                return node_name not in await node_names(api_client) and (
                    claim["metadata"]["name"] not in names
                )

            await eventually(released, within=GRACE + 60)
            assert kube_http.exists(created[0]), "the test's finalizer still holds the attachment"
    finally:
        for path in created:
            kube_http.force_delete(path)
