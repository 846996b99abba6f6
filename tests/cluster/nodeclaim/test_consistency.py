"""The NodeClaim consistency check on the real local cluster: a Node smaller than its NodeClaim
promised, and a deleting NodeClaim whose Node a PDB keeps from draining, each give a
FailedConsistencyCheck event and ConsistentStateFound=False; a Node that matches gives True. A
checked NodeClaim is not checked again within the scan period. Time is a FakeClock."""

from __future__ import annotations

import datetime
import secrets
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeSpec, NodeStatus
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimStatus, ResourceRequests
from karpy.controllers.nodeclaim.consistency import SCAN_PERIOD, ConsistencyController
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES, PODDISRUPTIONBUDGETS, PODS
from karpy.runtime.clock import FakeClock
from tests.cluster.nodeclaim.conftest import make_nodeclaim
from tests.support.clusterview import CORE_KINDS, LiveView, live_view
from tests.support.kubehttp import KubeHTTP

pytestmark = pytest.mark.usefixtures("karpy_crds")

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
EXPECTED = {"cpu": Quantity("4"), "memory": Quantity("16Gi"), "pods": Quantity("110")}


@pytest.fixture
async def pdb_live(kube: KubeClient) -> AsyncIterator[LiveView]:
    async with live_view(kube, (*CORE_KINDS, PODDISRUPTIONBUDGETS)) as view:
        yield view


async def _registered(kube: KubeClient, name: str, node_memory: str) -> NodeClaim:
    """An initialized NodeClaim that asked for 1 cpu and 1Gi and expects EXPECTED, and its Node
    (kwok-managed, with `node_memory` of memory)."""
    claim = make_nodeclaim(name)
    spec = attrs.evolve(
        claim.spec,
        resources=ResourceRequests(requests={"cpu": Quantity("1"), "memory": Quantity("1Gi")}),
    )
    await kube.create(NODECLAIMS, attrs.evolve(claim, spec=spec))
    initialized = Condition(
        type=ConditionType.INITIALIZED,
        status=ConditionStatus.TRUE,
        reason="Initialized",
        last_transition_time=NOW,
    )
    provider_id = f"fake://{name}"
    claim = await kube.patch_status(
        NODECLAIMS,
        name,
        NodeClaimStatus(
            provider_id=provider_id,
            node_name=name,
            capacity=EXPECTED,
            allocatable=EXPECTED,
            conditions=(initialized,),
        ),
    )
    capacity = {**EXPECTED, "memory": Quantity(node_memory)}
    await kube.create(
        NODES,
        Node(
            metadata=ObjectMeta(
                name=name, annotations={wk.ANNOTATION_KWOK_NODE: wk.KWOK_NODE_VALUE}
            ),
            spec=NodeSpec(provider_id=provider_id),
            status=NodeStatus(capacity=capacity, allocatable=capacity),
        ),
    )
    node = await kube.get(NODES, name)
    if node.status.capacity.get("memory") != node_memory:
        await kube.patch_status(NODES, name, NodeStatus(capacity=capacity, allocatable=capacity))
    return claim


def _consistent(claim: NodeClaim) -> Condition | None:
    return next(
        (c for c in claim.status.conditions if c.type == ConditionType.CONSISTENT_STATE_FOUND),
        None,
    )


def _messages(kube_http: KubeHTTP, uid: str) -> list[str]:
    return [
        e["message"]
        for e in kube_http.get("/api/v1/namespaces/default/events")["items"]
        if e["involvedObject"].get("uid") == uid and e["reason"] == "FailedConsistencyCheck"
    ]


async def test_a_node_smaller_than_its_nodeclaim_fails_the_check_and_a_matching_one_passes(
    kube: KubeClient, pdb_live: LiveView, kube_http: KubeHTTP
) -> None:
    live = pdb_live
    suffix = secrets.token_hex(3)
    clock = FakeClock(NOW)
    controller = ConsistencyController(kube, live.view, clock=clock, recorder=Recorder(kube, clock))
    check = live.settled(controller.reconcile)
    small = await _registered(kube, f"cons-small-{suffix}", "8Gi")
    right = await _registered(kube, f"cons-right-{suffix}", "16Gi")

    result = await check(small.metadata.name or "")
    assert result.requeue_after == SCAN_PERIOD.total_seconds()
    await check(right.metadata.name or "")
    await live.caught_up()

    got = await kube.get(NODECLAIMS, small.metadata.name or "")
    condition = _consistent(got)
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        ConditionStatus.FALSE,
        "ConsistencyCheckFailed",
        "Consistency Check Failed",
    )
    assert _messages(kube_http, small.metadata.uid or "") == [
        "expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"
    ]
    # Informational only: Ready is not derived from it.
    assert all(c.type != ConditionType.READY for c in got.status.conditions)

    got = await kube.get(NODECLAIMS, right.metadata.name or "")
    condition = _consistent(got)
    assert condition is not None
    assert (condition.status, condition.reason) == (ConditionStatus.TRUE, "ConsistentStateFound")
    assert _messages(kube_http, right.metadata.uid or "") == []

    # Within the scan period a Node's events cost nothing: the rest of the period is waited.
    clock.step(datetime.timedelta(minutes=4))
    result = await check(small.metadata.name or "")
    assert result.requeue_after == pytest.approx(6 * 60)
    # The Node is fixed; the next scan finds it consistent.
    await kube.patch_status(
        NODES, small.metadata.name or "", NodeStatus(capacity=EXPECTED, allocatable=EXPECTED)
    )
    clock.step(datetime.timedelta(minutes=6))
    await check(small.metadata.name or "")
    await live.caught_up()
    condition = _consistent(await kube.get(NODECLAIMS, small.metadata.name or ""))
    assert condition is not None
    assert condition.status is ConditionStatus.TRUE


async def test_a_deleting_nodeclaim_whose_node_a_pdb_blocks_fails_the_check(
    kube: KubeClient, pdb_live: LiveView, kube_http: KubeHTTP, namespace: str
) -> None:
    live = pdb_live
    suffix = secrets.token_hex(3)
    clock = FakeClock(NOW)
    controller = ConsistencyController(kube, live.view, clock=clock, recorder=Recorder(kube, clock))
    claim = await _registered(kube, f"cons-pdb-{suffix}", "16Gi")
    name = claim.metadata.name or ""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guarded", "labels": {"app": "guarded"}},
        "spec": {
            "nodeName": name,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
        },
    }
    await kube.create_raw(PODS, pod, namespace=namespace)
    pdb: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    await kube.create_raw(PODDISRUPTIONBUDGETS, pdb, namespace=namespace)
    await kube.merge_patch(
        NODECLAIMS, name, {"metadata": {"finalizers": [wk.FINALIZER_TERMINATION]}}
    )
    await kube.delete(NODECLAIMS, name)

    await live.settled(controller.reconcile)(name)
    await live.caught_up()
    condition = _consistent(await kube.get(NODECLAIMS, name))
    assert condition is not None
    assert (condition.status, condition.reason) == (
        ConditionStatus.FALSE,
        "ConsistencyCheckFailed",
    )
    assert _messages(kube_http, claim.metadata.uid or "") == [
        f'can\'t drain node, PDB "{namespace}/guard" is blocking evictions'
    ]
