"""NodeOverlays on the local control plane with kwok, through the whole daemon.

A price overlay makes a dearer type (m5.large) the cheapest, so that is what karpy launches
for a pod the provider's own prices would put on c6g.large; a second overlay of the same
weight on the same type is marked Conflict and not applied. A capacity overlay adds
`example.com/widget` to one type, so a pod asking for a widget (which no type reports) gets a
node of that type and runs. With the feature gate off, an overlay is reported as not applied
(ValidationSucceeded=False, NodeOverlayDisabled) rather than silently ignored.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy_kwok.catalog import instance_types, load_entries
from tests.e2e.daemon import (
    PAUSE_IMAGE,
    create_deployment,
    deployment,
    fresh_nodepool,
    running,
    running_daemon,
    scale,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

GATE_ON = {"FEATURE_GATES": "NodeOverlay=true"}
DEARER = "m5.large"
WIDGET = "example.com/widget"


def _overlay(name: str, intent: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A NodeOverlay selecting the nodes of one test's NodePool (by its `intent` label)."""
    return {
        "apiVersion": f"{wk.GROUP}/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "requirements": [
                {"key": "intent", "operator": "In", "values": [intent]},
                *spec.get("requirements", []),
            ],
        },
    }


async def _create(api: client.ApiClient, body: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).create_cluster_custom_object(
        wk.GROUP, "v1alpha1", "nodeoverlays", body
    )


def _validation(
    api: client.ApiClient, name: str, status: str
) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """A probe: the overlay's ValidationSucceeded condition once it has `status`."""

    async def probe() -> dict[str, Any] | None:
        got = await client.CustomObjectsApi(api).get_cluster_custom_object(
            wk.GROUP, "v1alpha1", "nodeoverlays", name
        )
        for condition in (got.get("status") or {}).get("conditions") or []:
            if condition["type"] == "ValidationSucceeded" and condition["status"] == status:
                return dict(condition)
        return None

    return probe


async def _node_type(api: client.ApiClient, pod: Any) -> str:
    node = await client.CoreV1Api(api).read_node(pod.spec.node_name)
    label: str = node.metadata.labels[wk.LABEL_INSTANCE_TYPE]
    return label


async def test_a_price_overlay_changes_the_launched_type_and_a_rival_is_a_conflict(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    catalog = {t.name: t for t in instance_types(load_entries(None), unavailable=())}
    cheapest = min(catalog.values(), key=lambda t: t.offerings[0].price)
    assert cheapest.name != DEARER  # without the overlay, the pod would not land on DEARER
    _, labels = await fresh_nodepool(api_client, "overlay-price")
    suffix = secrets.token_hex(3)
    winner, rival = f"zz-discount-{suffix}", f"aa-rival-{suffix}"
    select = [{"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": [DEARER]}]
    await _create(
        api_client,
        _overlay(
            winner, labels["intent"], {"weight": 10, "price": "0.001", "requirements": select}
        ),
    )
    await _create(
        api_client,
        _overlay(rival, labels["intent"], {"weight": 10, "price": "5", "requirements": select}),
    )
    await create_deployment(api_client, namespace, deployment("priced", node_selector=labels))

    async with running_daemon(cluster_info, environ=GATE_ON):
        await eventually(_validation(api_client, winner, "True"), within=60, what="accepted")
        conflict = await eventually(
            _validation(api_client, rival, "False"), within=60, what="conflict"
        )
        assert conflict["reason"] == "Conflict"
        assert winner in conflict["message"]
        await scale(api_client, namespace, "priced", 1)
        (pod,) = await eventually(running(api_client, namespace, "priced", 1), within=90)
        assert await _node_type(api_client, pod) == DEARER


async def test_a_capacity_overlay_lets_a_pod_asking_for_the_resource_schedule(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    _, labels = await fresh_nodepool(api_client, "overlay-widget")
    name = f"widgets-{secrets.token_hex(3)}"
    await _create(
        api_client,
        _overlay(
            name,
            labels["intent"],
            {
                "requirements": [
                    {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m6g.large"]}
                ],
                "capacity": {WIDGET: "4"},
            },
        ),
    )
    body = deployment("widget", node_selector=labels, replicas=1)
    container = body["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == PAUSE_IMAGE
    container["resources"] = {
        "requests": {"cpu": "500m", "memory": "256Mi", WIDGET: "1"},
        "limits": {WIDGET: "1"},
    }

    async with running_daemon(cluster_info, environ=GATE_ON):
        await eventually(_validation(api_client, name, "True"), within=60, what="accepted")
        await create_deployment(api_client, namespace, body)
        (pod,) = await eventually(running(api_client, namespace, "widget", 1), within=90)
        assert await _node_type(api_client, pod) == "m6g.large"
        node = await client.CoreV1Api(api_client).read_node(pod.spec.node_name)
        assert node.status.allocatable[WIDGET] == "4"


async def test_with_the_gate_off_an_overlay_is_reported_not_applied(
    cluster_info: ClusterInfo, api_client: client.ApiClient
) -> None:
    name = f"ignored-{secrets.token_hex(3)}"
    await _create(api_client, _overlay(name, "nobody", {"priceAdjustment": "-10%"}))
    async with running_daemon(cluster_info):
        condition = await eventually(
            _validation(api_client, name, "False"), within=60, what="disabled"
        )
    assert condition["reason"] == "NodeOverlayDisabled"
    assert "FEATURE_GATES=NodeOverlay=true" in condition["message"]
