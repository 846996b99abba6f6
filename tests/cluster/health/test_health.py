"""Node repair on the real local cluster: a node NotReady past the toleration loses its NodeClaim
(stamped with a termination deadline of now), unless too much of its pool is unhealthy, which a
NodeRepairBlocked event says (the threshold is an option), or the provider says another
controller repairs it (a MachineHealthCheck), which a NodeRepairDeferred event says."""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeCondition, NodeSpec, NodeStatus
from karpy.apis.meta import ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimStatus
from karpy.cloudprovider.protocol import RepairPolicy
from karpy.controllers.node.health.controller import NodeHealthController, policies_with
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.manager import RepairedElsewhere
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from tests.cluster.nodeclaim.conftest import make_nodeclaim
from tests.support.clusterview import LiveView, live_view
from tests.support.kubehttp import KubeHTTP

pytestmark = pytest.mark.usefixtures("karpy_crds")

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
HOLD = "example.com/hold"
"""A finalizer that keeps a deleted NodeClaim readable (the test clean-up strips it)."""


@pytest.fixture
async def live(kube: KubeClient) -> AsyncIterator[LiveView]:
    async with live_view(kube) as view:
        yield view


async def _sick_node(kube: KubeClient, name: str, pool: str) -> None:
    """A Node of `pool` (no kubelet or kwok serves it) NotReady for an hour, and its NodeClaim."""
    provider_id = f"fake://{name}"
    await kube.create(
        NODES,
        Node(
            metadata=ObjectMeta(name=name, labels={wk.LABEL_NODEPOOL: pool}),
            spec=NodeSpec(provider_id=provider_id),
        ),
    )
    since = NOW - datetime.timedelta(hours=1)
    condition = NodeCondition(
        type="Ready",
        status=ConditionStatus.FALSE,
        reason="KubeletNotReady",
        last_heartbeat_time=since,
        last_transition_time=since,
    )
    await kube.patch_status(NODES, name, NodeStatus(conditions=(condition,)))
    claim = make_nodeclaim(name)
    metadata = attrs.evolve(claim.metadata, labels={wk.LABEL_NODEPOOL: pool}, finalizers=(HOLD,))
    await kube.create(NODECLAIMS, attrs.evolve(claim, metadata=metadata))
    await kube.patch_status(NODECLAIMS, name, NodeClaimStatus(provider_id=provider_id))


def _controller(
    kube: KubeClient,
    live: LiveView,
    telemetry: Telemetry,
    threshold: str,
    repaired_elsewhere: RepairedElsewhere | None = None,
) -> NodeHealthController:
    clock = FakeClock(NOW)
    return NodeHealthController(
        kube,
        live.view,
        # The provider's Ready=False policy, its 30 minutes shortened to 10 by the option.
        policies=policies_with(
            (RepairPolicy("Ready", "False", datetime.timedelta(minutes=30)),), toleration=600.0
        ),
        unhealthy_threshold=threshold,
        clock=clock,
        recorder=Recorder(kube, clock),
        telemetry=telemetry,
        repaired_elsewhere=repaired_elsewhere,
    )


async def test_repair_is_blocked_beyond_the_threshold_and_proceeds_within_it(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP, telemetry: Telemetry
) -> None:
    suffix = secrets.token_hex(3)
    pool = f"health-{suffix}"
    first, second = f"sick-a-{suffix}", f"sick-b-{suffix}"
    await _sick_node(kube, first, pool)
    await _sick_node(kube, second, pool)

    # Both nodes of the pool are unhealthy: 20 % of 2 allows one.
    strict = _controller(kube, live, telemetry, "20%")
    result = await live.settled(strict.reconcile)(first)
    assert result.requeue_after == 300.0
    node_uid = (await kube.get(NODES, first)).metadata.uid or ""
    assert ("Warning", "NodeRepairBlocked") in kube_http.events_about(node_uid)
    assert (await kube.get(NODECLAIMS, first)).metadata.deletion_timestamp is None

    # A small pool's operator allows both.
    lenient = _controller(kube, live, telemetry, "100%")
    assert (await live.settled(lenient.reconcile)(first)).requeue_after is None
    repaired = await kube.get(NODECLAIMS, first)
    assert repaired.metadata.deletion_timestamp is not None
    stamp = repaired.metadata.annotations[wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP]
    assert stamp == "2026-01-01T12:00:00Z"
    text = telemetry.prometheus_text()
    assert (
        f'karpenter_nodeclaims_unhealthy_disrupted_total{{condition="Ready",nodepool="{pool}"}} 1'
        in text
    )


async def test_a_node_another_controller_repairs_is_left_to_it(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP, telemetry: Telemetry, caplog: Any
) -> None:
    suffix = secrets.token_hex(3)
    covered, other = f"covered-{suffix}", f"other-{suffix}"
    await _sick_node(kube, covered, f"health-{suffix}")
    await _sick_node(kube, other, f"health-{suffix}")
    asked: list[str] = []

    async def machine_health_check(claim: NodeClaim) -> str | None:
        # As the Cluster API provider answers: who remediates this NodeClaim's machine.
        asked.append(claim.metadata.name or "")
        return "MachineHealthCheck fleet/workers" if claim.metadata.name == covered else None

    controller = _controller(kube, live, telemetry, "100%", machine_health_check)
    with caplog.at_level(logging.INFO, logger="karpy.controllers.node.health.controller"):
        result = await live.settled(controller.reconcile)(covered)
    assert result.requeue_after == 300.0
    assert (await kube.get(NODECLAIMS, covered)).metadata.deletion_timestamp is None
    node_uid = (await kube.get(NODES, covered)).metadata.uid or ""
    assert ("Normal", "NodeRepairDeferred") in kube_http.events_about(node_uid)
    message = "node repair left to another controller"
    (line,) = [r for r in caplog.records if r.getMessage() == message]
    assert line.owner == "MachineHealthCheck fleet/workers"  # type: ignore[attr-defined]

    # A node no other controller covers is repaired as before.
    assert (await live.settled(controller.reconcile)(other)).requeue_after is None
    assert (await kube.get(NODECLAIMS, other)).metadata.deletion_timestamp is not None
    assert asked == [covered, other]
