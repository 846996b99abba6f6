"""A pod a PodDisruptionBudget holds, on a node deleted under a NodePool terminationGracePeriod,
with `karpy run` (kwok nodes): karpy cannot evict it, so it deletes it once the deadline less the
pod's own terminationGracePeriodSeconds has come, with that grace, and the node still goes.

Under a 60 s terminationGracePeriod a pod with a 30 s grace is deleted 30 s after the NodeClaim's
deletion, with its 30 s: read from the update the apiserver made when the deletion began (kwok
finishes a deletion at once), whose deletionTimestamp is the deletion's start plus its grace.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any, Final

import pytest
from kubernetes_asyncio import client

from karpy.apis.codec import parse_time
from karpy.kube.client import KubeClient
from karpy.kube.kinds import PODS
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    node_names,
    nodeclaims,
    running,
    running_daemon,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

NODE_GRACE: Final = 60
"""The NodePool's terminationGracePeriod, seconds."""
POD_GRACE: Final = 30
"""The pod's own terminationGracePeriodSeconds."""


async def _deletion(
    kube: KubeClient, namespace: str, app: str, *, since: str
) -> tuple[datetime.datetime, int]:
    """The deletionTimestamp and deletionGracePeriodSeconds of the first update after `since`
    that shows a pod labelled app=`app` terminating."""
    buffer = b""
    while True:
        async with kube.open_watch(
            PODS, resource_version=since, timeout_seconds=60, namespace=namespace
        ) as response:
            while chunk := await response.content.readany():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in filter(bytes.strip, lines):
                    event = json.loads(line)
                    meta = event["object"]["metadata"]
                    since = meta.get("resourceVersion", since)
                    if meta.get("labels", {}).get("app") == app and meta.get("deletionTimestamp"):
                        return parse_time(meta["deletionTimestamp"]), meta[
                            "deletionGracePeriodSeconds"
                        ]


async def test_a_pdb_blocked_pod_is_deleted_its_own_grace_before_the_deadline(
    cluster_info: ClusterInfo, api_client: client.ApiClient, kube_http: KubeHTTP, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(
        api_client, "tgp", termination_grace_period=f"{NODE_GRACE}s"
    )
    guarded: dict[str, Any] = deployment("guarded", node_selector=labels, replicas=1)
    guarded["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = POD_GRACE
    await create_deployment(api_client, namespace, guarded)
    kube_http.request(
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        async with running_daemon(cluster_info):
            (pod,) = await eventually(running(api_client, namespace, "guarded", 1), within=60)
            node_name = pod.spec.node_name
            (claim,) = await nodeclaims(api_client, pool)
            listed = await kube.list(PODS, namespace=namespace)
            watching = asyncio.create_task(
                _deletion(kube, namespace, "guarded", since=listed.resource_version)
            )
            try:
                await core.delete_node(node_name)

                async def claim_deleting() -> str | None:
                    for c in await nodeclaims(api_client, pool):
                        if c["metadata"]["name"] == claim["metadata"]["name"]:
                            stamp: str | None = c["metadata"].get("deletionTimestamp")
                            return stamp
                    return None

                stamp = await eventually(claim_deleting, within=30, what="the NodeClaim deleting")
                async with asyncio.timeout(NODE_GRACE + 60):
                    ends, grace = await watching
            finally:
                watching.cancel()

            # Deleted with its own grace, its own grace before the deadline: not before.
            assert grace == POD_GRACE
            claim_deleted = parse_time(stamp)
            began = ends - datetime.timedelta(seconds=grace)
            earliest = claim_deleted + datetime.timedelta(seconds=NODE_GRACE - POD_GRACE)
            assert began >= earliest - datetime.timedelta(seconds=1), (began, earliest)

            async def node_gone() -> bool:
                return node_name not in await node_names(api_client)

            await eventually(node_gone, within=NODE_GRACE + 30, what="the node gone")
    finally:
        await kube.close()
