"""Consolidation with the whole daemon on the local cluster (kwok provider): two half-empty
nodes become one, the move validated after the validation delay and run replacement-first by
the orchestration queue; a `karpenter.sh/do-not-disrupt` pod holds its node.
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
    nodeclaims,
    running,
    running_daemon,
    steadily,
)
from tests.support.marks import ONE_AT_A_TIME
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), ONE_AT_A_TIME]

FLAGS = ("--consolidation-validation-delay", "1s")


def _apart(app: str) -> dict[str, Any]:
    """Prefer one pod of `app` per node: the provisioner spreads them, consolidation may not."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": app}},
                        "topologyKey": wk.LABEL_HOSTNAME,
                    },
                }
            ]
        }
    }


async def _underutilized_pool(api: client.ApiClient, prefix: str) -> tuple[str, dict[str, str]]:
    """A NodePool of on-demand c5.xlarge (4 vCPU) nodes that consolidates underutilized nodes
    at once."""
    pool, labels = await fresh_nodepool(api, prefix)
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
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                            {
                                "key": wk.LABEL_INSTANCE_TYPE,
                                "operator": "In",
                                "values": ["c5.xlarge"],
                            },
                            {
                                "key": wk.LABEL_CAPACITY_TYPE,
                                "operator": "In",
                                "values": [wk.CAPACITY_TYPE_ON_DEMAND],
                            },
                        ]
                    }
                },
            }
        },
        _content_type="application/merge-patch+json",
    )
    return pool, labels


async def _live_claims(api: client.ApiClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await nodeclaims(api, pool) if not c["metadata"].get("deletionTimestamp")]


def _required_apart(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": wk.LABEL_HOSTNAME}
            ]
        }
    }


async def _two_half_empty_nodes(
    api: client.ApiClient,
    namespace: str,
    labels: dict[str, str],
    app: str,
    annotations: dict[str, str] | None = None,
) -> set[str]:
    """Two nodes with one small `app` pod each: spacers force two nodes, kube-scheduler spreads
    the `app` pods over them (preferred anti-affinity), then the spacers go."""
    spacer = f"{app}-spacer"
    await create_deployment(
        api,
        namespace,
        deployment(
            spacer,
            node_selector=labels,
            replicas=2,
            affinity=_required_apart(spacer),
            cpu="2500m",
            memory="1Gi",
        ),
    )
    await eventually(running(api, namespace, spacer, 2), within=120)
    body = deployment(
        app, node_selector=labels, replicas=2, affinity=_apart(app), cpu="500m", memory="256Mi"
    )
    body["spec"]["template"]["metadata"]["annotations"] = dict(annotations or {})
    await create_deployment(api, namespace, body)
    pods = await eventually(running(api, namespace, app, 2), within=120)
    nodes = {p.spec.node_name for p in pods}
    assert len(nodes) == 2, "kube-scheduler spread the pods over both nodes"
    await client.AppsV1Api(api).delete_namespaced_deployment(spacer, namespace)
    return nodes


async def test_two_half_empty_nodes_become_one(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await _underutilized_pool(api_client, "consolidate")
    async with running_daemon(cluster_info, flags=FLAGS):
        first = await _two_half_empty_nodes(api_client, namespace, labels, "half")

        async def merged() -> list[Any]:
            live = await running(api_client, namespace, "half", 2)()
            claims = await nodeclaims(api_client, pool)
            if len(claims) != 1 or len({p.spec.node_name for p in live}) != 1:
                return []
            return live

        pods = await eventually(merged, within=180, interval=1.0, what="one node left")
        assert {p.spec.node_name for p in pods} <= first, "a delete: no new node was needed"

        async def one_node() -> bool:
            return len(await _live_claims(api_client, pool)) == 1

        await steadily(one_node, during=15)  # and nothing undoes it


async def test_a_do_not_disrupt_pod_holds_its_node_with_an_event(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await _underutilized_pool(api_client, "held")
    async with running_daemon(cluster_info, flags=FLAGS):
        held = await _two_half_empty_nodes(
            api_client, namespace, labels, "kept", {wk.ANNOTATION_DO_NOT_DISRUPT: "true"}
        )

        async def blocked_event() -> list[Any]:
            events = await client.CoreV1Api(api_client).list_event_for_all_namespaces(
                field_selector="reason=DisruptionBlocked"
            )
            return [
                e
                for e in events.items
                if e.involved_object.name in held and "do-not-disrupt" in (e.message or "")
            ]

        await eventually(blocked_event, within=60, interval=1.0, what="DisruptionBlocked event")

        async def both_nodes() -> bool:
            return len(await _live_claims(api_client, pool)) == 2

        await steadily(both_nodes, during=15)
