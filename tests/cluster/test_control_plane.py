"""The local control plane behaves like a real cluster in the ways karpy depends on."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.v1.labels import ANNOTATION_KWOK_NODE, KWOK_NODE_VALUE
from tests.support.waiting import eventually


def pause_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
            **spec,
        },
    }


def kwok_node(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {ANNOTATION_KWOK_NODE: KWOK_NODE_VALUE},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }


async def test_deployment_pods_are_created_by_the_controller_manager(
    api_client: client.ApiClient, namespace: str
) -> None:
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    template = pause_pod("web")
    await apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        },
    )

    async def three_pods() -> bool:
        pods = await core.list_namespaced_pod(namespace, label_selector="app=web")
        return len(pods.items) == 3

    await eventually(three_pods)


async def test_pod_matching_no_node_is_marked_unschedulable_by_the_scheduler(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_pod(
        namespace, pause_pod("lonely", nodeSelector={"intent": "nowhere-to-be-found"})
    )

    async def scheduled_condition() -> Any:
        pod = await core.read_namespaced_pod("lonely", namespace)
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled":
                return condition
        return None

    condition = await eventually(scheduled_condition)
    assert condition.status == "False"
    assert condition.reason == "Unschedulable"
    assert pod_is_unbound(await core.read_namespaced_pod("lonely", namespace))


def pod_is_unbound(pod: Any) -> bool:
    return not pod.spec.node_name


async def test_kwok_node_becomes_ready_and_runs_a_fitting_pod(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_node(kwok_node("kwok-ready-1", labels={"intent": "ready-test"}))

    async def node_ready() -> bool:
        node = await core.read_node("kwok-ready-1")
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    await eventually(node_ready)
    await core.create_namespaced_pod(
        namespace,
        pause_pod(
            "fits",
            nodeSelector={"intent": "ready-test"},
            tolerations=[{"operator": "Exists"}],
        ),
    )

    async def running() -> Any:
        pod = await core.read_namespaced_pod("fits", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = await eventually(running)
    assert pod.spec.node_name == "kwok-ready-1"


async def test_eviction_blocked_by_a_pdb_answers_429(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    await core.create_node(kwok_node("kwok-pdb-1", labels={"intent": "pdb-test"}))
    await core.create_namespaced_pod(
        namespace,
        pause_pod(
            "guarded", nodeSelector={"intent": "pdb-test"}, tolerations=[{"operator": "Exists"}]
        ),
    )
    await policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )

    async def running() -> bool:
        pod = await core.read_namespaced_pod("guarded", namespace)
        return bool(pod.status.phase == "Running")

    await eventually(running)

    async def pdb_observed() -> bool:
        pdb = await policy.read_namespaced_pod_disruption_budget("guard", namespace)
        return bool(pdb.status and pdb.status.observed_generation and pdb.status.current_healthy)

    await eventually(pdb_observed)
    with pytest.raises(ApiException) as raised:
        await core.create_namespaced_pod_eviction(
            "guarded",
            namespace,
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "guarded", "namespace": namespace},
            },
        )
    assert raised.value.status == 429
    assert "disruption budget" in raised.value.body
    # The pod is still there: a 429 never deletes anything.
    assert (await core.read_namespaced_pod("guarded", namespace)).metadata.name == "guarded"
