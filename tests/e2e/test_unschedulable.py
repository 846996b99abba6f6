"""A pod no NodePool can satisfy is told why, and launches nothing.

The provisioner's scheduling core explains every pod it could not place, per NodePool, and karpy
reports that explanation as a Warning `FailedScheduling` event on the pod (what `kubectl describe
pod` shows). Two pods here, each impossible for a different reason: one selects a label value the
only NodePool never offers, the other requests more cpu than the largest kwok instance type has.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    live_pods,
    no_nodeclaims,
    running_daemon,
    steadily,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

QUIET = 3.0
"""Seconds after the explanations during which no NodeClaim may appear (past a batch window)."""


async def test_a_pod_no_nodepool_can_satisfy_gets_an_explanation_and_no_nodeclaim(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "none")
    await create_deployment(
        api_client,
        namespace,
        deployment("elsewhere", node_selector={"intent": "not-offered"}, replicas=1),
    )
    await create_deployment(
        api_client,
        namespace,
        deployment("huge", node_selector=labels, replicas=1, cpu="64"),
    )

    async def explained(app: str) -> str:
        """The message of karpy's FailedScheduling event on the `app` pod, once there is one."""
        pods = await live_pods(api_client, namespace, app)
        if not pods:
            return ""
        name = pods[0].metadata.name
        events = await core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        found: list[Any] = [
            e
            for e in events.items
            if e.reason == "FailedScheduling" and e.source and e.source.component == "karpy"
        ]
        if not found:
            return ""
        assert found[0].type == "Warning"
        message: str = found[0].message
        assert message.startswith(
            f"Failed to schedule pod, pod {namespace}/{name} cannot be placed"
        )
        return message

    async with running_daemon(cluster_info):
        elsewhere = await eventually(lambda: explained("elsewhere"), within=30)
        huge = await eventually(lambda: explained("huge"), within=30)

        assert f'nodepool "{pool}"' in elsewhere
        assert "not-offered" in elsewhere
        assert labels["intent"] in elsewhere
        assert f'nodepool "{pool}"' in huge
        assert "insufficient cpu" in huge

        await steadily(lambda: no_nodeclaims(api_client, pool), during=QUIET)
        for app in ("elsewhere", "huge"):
            (pod,) = await live_pods(api_client, namespace, app)
            assert pod.spec.node_name is None
