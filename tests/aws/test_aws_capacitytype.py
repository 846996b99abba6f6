"""A capacity reservation that ends, on the real local control plane with moto's reservations
(the emulator's): the NodeClaims launched into it, and their registered Nodes, are relabelled
``on-demand`` and lose the reservation labels, as Karpenter's capacity-type controller does;
NodeClaims in a reservation still active, or being deleted, and Nodes not yet registered are
left as they are."""

from __future__ import annotations

import secrets

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy_aws.apis import labels as awslabels
from karpy_aws.controllers.capacitytype import CapacityTypeController
from karpy_aws.providers.capacityreservations import ReservationAvailability
from karpy_aws.session import AWSSession
from tests.support.providers import Informed
from tests.support.waiting import eventually

from .conftest import Moto, boto_client, make_nodeclaim
from .test_aws_capacityreservations import ZONE, _reserve

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

RID = awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID
RTYPE = awslabels.LABEL_AWS_CAPACITY_RESERVATION_TYPE
CT = wk.LABEL_CAPACITY_TYPE


async def _reserved_claim(
    kube: KubeClient, cleanup: list[str], reservation: str, *, registered: bool = True
) -> tuple[NodeClaim, str]:
    """A reserved NodeClaim in ``reservation`` with its Node (registered or not)."""
    suffix = secrets.token_hex(4)
    base = make_nodeclaim(name=f"reserved-{suffix}")
    labels = {**base.metadata.labels, CT: "reserved", RID: reservation, RTYPE: "default"}
    claim = attrs.evolve(base, metadata=attrs.evolve(base.metadata, labels=labels))
    cleanup.append(NODECLAIMS.object_path(claim.metadata.name or ""))
    created = await kube.create(NODECLAIMS, claim)
    provider_id = f"aws:///{ZONE}/i-{secrets.token_hex(8)}"
    node_name = f"ip-{suffix}.internal"
    created = await kube.patch_status(
        NODECLAIMS,
        created.metadata.name or "",
        attrs.evolve(created.status, provider_id=provider_id, node_name=node_name),
    )
    node_labels = {**labels, wk.LABEL_NODE_REGISTERED: "true" if registered else "false"}
    cleanup.append(NODES.object_path(node_name))
    await kube.create(
        NODES,
        Node(
            metadata=ObjectMeta(name=node_name, labels=node_labels),
            spec=NodeSpec(provider_id=provider_id),
        ),
    )
    return created, node_name


async def test_nodes_of_an_ended_reservation_become_on_demand(
    kube: KubeClient, session: AWSSession, moto: Moto, cleanup: list[str]
) -> None:
    ending = _reserve(moto, count=3)
    staying = _reserve(moto, count=1)
    ended_claim, ended_node = await _reserved_claim(kube, cleanup, ending)
    early_claim, early_node = await _reserved_claim(kube, cleanup, ending, registered=False)
    kept_claim, kept_node = await _reserved_claim(kube, cleanup, staying)
    boto_client(moto, "ec2").cancel_capacity_reservation(CapacityReservationId=ending)

    telemetry = Telemetry.setup(service_name="tests")
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS, NODES)
    reservations = ReservationAvailability(await session.client("ec2"), FakeClock())
    try:
        async with informed.running() as view:

            async def seen() -> bool:
                names = {c.metadata.name for c in view.nodeclaims()}
                return all(
                    c.metadata.name in names
                    and len(view.nodes_with_provider_id(c.status.provider_id or "")) == 1
                    for c in (ended_claim, early_claim, kept_claim)
                )

            await eventually(seen, within=30)
            controller = CapacityTypeController(kube, view, reservations)
            relabelled = await controller.act()
    finally:
        telemetry.shutdown()

    assert sorted(relabelled) == sorted(
        [ended_claim.metadata.name or "", early_claim.metadata.name or ""]
    )
    for claim in (ended_claim, early_claim):
        found: NodeClaim = await kube.get(NODECLAIMS, claim.metadata.name or "")
        assert found.metadata.labels[CT] == "on-demand"
        assert RID not in found.metadata.labels
        assert RTYPE not in found.metadata.labels
    node: Node = await kube.get(NODES, ended_node)
    assert node.metadata.labels[CT] == "on-demand"
    assert RID not in node.metadata.labels
    # Not registered yet: its labels come from the NodeClaim once it registers.
    early: Node = await kube.get(NODES, early_node)
    assert early.metadata.labels[CT] == "reserved"
    # Still active: untouched.
    kept: NodeClaim = await kube.get(NODECLAIMS, kept_claim.metadata.name or "")
    assert kept.metadata.labels[CT] == "reserved"
    assert kept.metadata.labels[RID] == staying
    kept_node_now: Node = await kube.get(NODES, kept_node)
    assert kept_node_now.metadata.labels[RID] == staying
