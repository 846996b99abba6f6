"""Capacity reservations on moto (with the emulator's reservations, which moto lacks): the
selector terms resolve into status, a reservation's type is offered as ``reserved`` at
Karpenter's near-zero price and launched into first (the launch template targets it), a full
reservation falls back to on-demand, no more NodeClaims of a pass go into a reservation than it
has room for, a node whose reservation left the selector drifts, and one whose reservation
ended does not (it is relabelled on-demand: tests/aws/test_aws_capacitytype.py)."""

from __future__ import annotations

import asyncio
import datetime
import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.cloudprovider import InsufficientCapacityError
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus
from karpy_aws.cloudprovider.drift import CAPACITY_RESERVATION_DRIFT
from karpy_aws.cloudprovider.nodeclaims import nodeclaim_from
from karpy_aws.providers.capacityreservations import RESERVED_PRICE_DIVISOR
from karpy_aws.providers.instance import parse_instance

from .conftest import (
    FaultInjector,
    Moto,
    ProviderKit,
    boto_client,
    make_nodeclaim,
    make_nodeclass,
    node_role,
    ready_nodeclass,
)
from .test_aws_nodeclassstatus import Resolver, _conditions, resolve  # noqa: F401

pytestmark = pytest.mark.aws

ZONE = "us-west-2a"
ALLOW_RESERVED = (wk.LABEL_CAPACITY_TYPE, "In", ("reserved", "on-demand"))
ONLY_M5 = (wk.LABEL_INSTANCE_TYPE, "In", ("m5.large",))


def _reserve(moto: Moto, *, count: int = 1, **tags: str) -> str:
    """A new active reservation of m5.large in us-west-2a, tagged ``tags``; its id."""
    answer = boto_client(moto, "ec2").create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=ZONE,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ],
    )
    return str(answer["CapacityReservation"]["CapacityReservationId"])


def _template_data(kit: ProviderKit, config: int = 0) -> dict[str, Any]:
    name = kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"][config][
        "LaunchTemplateSpecification"
    ]["LaunchTemplateName"]
    versions = kit.ec2().describe_launch_template_versions(LaunchTemplateName=name)
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


def _template_data_of(kit: ProviderKit, request: dict[str, Any]) -> dict[str, Any]:
    name = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    versions = kit.ec2().describe_launch_template_versions(LaunchTemplateName=name)
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


def _reserved_nodeclass(kit: ProviderKit, status: EC2NodeClassStatus) -> None:
    base = ready_nodeclass(kit.moto)
    kit.nodeclasses.put(
        attrs.evolve(
            base,
            status=attrs.evolve(base.status, capacity_reservations=status.capacity_reservations),
        )
    )


async def test_selector_terms_resolve_by_id_and_by_tags_and_owner(
    resolve: Resolver,  # noqa: F811
    moto: Moto,
) -> None:
    team = f"team-{secrets.token_hex(3)}"
    tagged = _reserve(moto, team=team)
    by_id = _reserve(moto)
    _reserve(moto, team="someone-else")
    cancelled = _reserve(moto, team=team)
    boto_client(moto, "ec2").cancel_capacity_reservation(CapacityReservationId=cancelled)
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            capacity_reservation_selector_terms=(
                nc.CapacityReservationSelectorTerm(tags={"team": team}, owner_id="123456789012"),
                nc.CapacityReservationSelectorTerm(id=by_id),
            ),
        )
    )
    found = {r.id: r for r in status.capacity_reservations}
    assert set(found) == {tagged, by_id}  # not another team's, not the cancelled one
    assert found[tagged].instance_type == "m5.large"
    assert found[tagged].availability_zone == ZONE
    assert found[tagged].owner_id == "123456789012"
    assert found[tagged].instance_match_criteria == "targeted"
    assert _conditions(status)["CapacityReservationsReady"][0] == "True"
    assert _conditions(status)["Ready"][0] == "True"

    # Another account's reservations are not this one's.
    foreign = await resolve(
        make_nodeclass(
            role=node_role(moto),
            capacity_reservation_selector_terms=(
                nc.CapacityReservationSelectorTerm(tags={"team": team}, owner_id="210987654321"),
            ),
        )
    )
    assert foreign.capacity_reservations == ()


async def test_an_unknown_reservation_id_is_a_false_condition_naming_the_field(
    resolve: Resolver,  # noqa: F811
    moto: Moto,
) -> None:
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            capacity_reservation_selector_terms=(
                nc.CapacityReservationSelectorTerm(id="cr-0123456789abcdef0"),
            ),
        )
    )
    state, reason, message = _conditions(status)["CapacityReservationsReady"]
    assert (state, reason) == ("False", "CapacityReservationSelectorInvalid")
    assert "capacityReservationSelectorTerms" in message
    assert "cr-0123456789abcdef0" in message
    assert _conditions(status)["Ready"][0] == "False"


async def test_a_reservation_is_offered_cheap_and_launched_into_then_on_demand_once_full(
    kit: ProviderKit,
    resolve: Resolver,  # noqa: F811
    moto: Moto,
) -> None:
    team = f"team-{secrets.token_hex(3)}"
    reservation = _reserve(moto, team=team)
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            capacity_reservation_selector_terms=(
                nc.CapacityReservationSelectorTerm(tags={"team": team}),
            ),
        )
    )
    _reserved_nodeclass(kit, status)
    pool = make_nodeclaim()
    nodepool_types = await kit.provider.get_instance_types(_pool_of(pool))
    m5 = next(t for t in nodepool_types if t.name == "m5.large")
    reserved = [o for o in m5.offerings if o.capacity_type == "reserved"]
    on_demand = min(o.price for o in m5.offerings if o.capacity_type == "on-demand")
    assert [(o.zone, o.available) for o in reserved] == [(ZONE, True)]
    assert reserved[0].price == pytest.approx(on_demand / RESERVED_PRICE_DIVISOR)

    first = await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="r-1"))
    labels = first.metadata.labels
    assert labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    assert labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID] == reservation
    assert labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_TYPE] == "default"
    assert labels[wk.LABEL_TOPOLOGY_ZONE] == ZONE
    request = kit.faults.requests["CreateFleet"][-1]
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert {
        o["AvailabilityZone"] for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]
    } == {ZONE}
    assert _template_data(kit)["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": reservation}
    }
    (described,) = kit.ec2().describe_capacity_reservations(CapacityReservationIds=[reservation])[
        "CapacityReservations"
    ]
    assert described["AvailableInstanceCount"] == 0  # EC2's count: the instance took the slot

    # Full: the next launch is on-demand, and its template stays out of open reservations.
    second = await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="r-2"))
    assert second.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"
    assert awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID not in second.metadata.labels
    assert _template_data(kit)["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "none"
    }


async def test_a_reservation_filled_behind_karpys_back_is_refused_then_on_demand(
    kit: ProviderKit,
    resolve: Resolver,  # noqa: F811
    moto: Moto,
    faults: FaultInjector,
) -> None:
    team = f"team-{secrets.token_hex(3)}"
    reservation = _reserve(moto, team=team)
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            capacity_reservation_selector_terms=(
                nc.CapacityReservationSelectorTerm(tags={"team": team}),
            ),
        )
    )
    _reserved_nodeclass(kit, status)
    # karpy reads the reservation's room (one)...
    await kit.provider.get_instance_types(_pool_of(make_nodeclaim()))
    # ...then someone else launches into it.
    ec2 = boto_client(moto, "ec2")
    template = f"other-{secrets.token_hex(3)}"
    ec2.create_launch_template(
        LaunchTemplateName=template,
        LaunchTemplateData={
            "ImageId": ready_nodeclass(moto).status.amis[0].id,
            "CapacityReservationSpecification": {
                "CapacityReservationTarget": {"CapacityReservationId": reservation}
            },
        },
    )
    ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": "$Latest",
                },
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": moto.subnets["a"]}],
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
    )
    with pytest.raises(InsufficientCapacityError, match="ReservationCapacityExceeded"):
        await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="r-3"))
    # The reservation has no room now; the retried NodeClaim launches on-demand.
    retried = await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="r-3"))
    assert retried.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"


async def test_a_node_whose_reservation_left_the_selector_drifts(
    kit: ProviderKit, moto: Moto
) -> None:
    # Still active in EC2, no longer in the NodeClass's status: its terms stopped selecting it.
    active = _reserve(moto)
    ended = _reserve(moto)
    boto_client(moto, "ec2").cancel_capacity_reservation(CapacityReservationId=ended)

    def labelled(reservation: str) -> NodeClaim:
        claim = make_nodeclaim()
        return attrs.evolve(
            claim,
            metadata=attrs.evolve(
                claim.metadata,
                labels={
                    **claim.metadata.labels,
                    wk.LABEL_CAPACITY_TYPE: "reserved",
                    awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID: reservation,
                },
            ),
        )

    assert await kit.provider.is_drifted(labelled(active)) == CAPACITY_RESERVATION_DRIFT
    # An ended reservation's instance runs on as on-demand: relabelled, not replaced.
    assert await kit.provider.is_drifted(labelled(ended)) is None
    assert await kit.provider.is_drifted(make_nodeclaim()) is None


async def test_one_pass_never_puts_more_nodeclaims_into_a_reservation_than_it_has_room(
    kit: ProviderKit,
    resolve: Resolver,  # noqa: F811
    moto: Moto,
) -> None:
    team = f"team-{secrets.token_hex(3)}"
    reservation = _reserve(moto, count=2, team=team)
    _reserved_nodeclass(
        kit,
        await resolve(
            make_nodeclass(
                role=node_role(moto),
                capacity_reservation_selector_terms=(
                    nc.CapacityReservationSelectorTerm(tags={"team": team}),
                ),
            )
        ),
    )
    # A pass's NodeClaims are launched at once: all four see the reservation's room of two.
    launched = await asyncio.gather(
        *(
            kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name=f"cap-{i}"))
            for i in range(4)
        )
    )
    types = sorted(c.metadata.labels[wk.LABEL_CAPACITY_TYPE] for c in launched)
    assert types == ["on-demand", "on-demand", "reserved", "reserved"]
    assert {
        c.metadata.labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID]
        for c in launched
        if c.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    } == {reservation}
    # None was sent to a full reservation: EC2 refused no launch.
    fleets = kit.faults.requests["CreateFleet"][-4:]
    targeted = 0
    for request in fleets:
        data = _template_data_of(kit, request)
        target = data.get("CapacityReservationSpecification", {}).get("CapacityReservationTarget")
        targeted += target == {"CapacityReservationId": reservation}
    assert targeted == 2


def _pool_of(nodeclaim: NodeClaim) -> NodePool:
    """A NodePool whose template names ``nodeclaim``'s NodeClass."""
    return NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    requirements=(), node_class_ref=nodeclaim.spec.node_class_ref
                )
            )
        ),
    )


def test_an_instance_ec2_reports_in_a_reservation_reads_back_as_reserved() -> None:
    raw = {
        "InstanceId": "i-0123456789abcdef0",
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": ZONE},
        "State": {"Name": "running"},
        "LaunchTime": "2026-01-01T00:00:00+00:00",
        "CapacityReservationId": "cr-0123456789abcdef0",
    }
    instance = parse_instance(raw)
    assert instance.capacity_type == "reserved"
    claim = nodeclaim_from(instance, None, now=instance.launch_time)
    assert claim.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    assert claim.metadata.labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID] == (
        "cr-0123456789abcdef0"
    )
    plain = parse_instance({k: v for k, v in raw.items() if k != "CapacityReservationId"})
    assert plain.capacity_type == "on-demand"


async def test_a_reservation_that_ends_gives_on_demand_and_leaves_its_nodes_running(
    kit: ProviderKit,
    resolve: Resolver,  # noqa: F811
    moto: Moto,
) -> None:
    team = f"team-{secrets.token_hex(3)}"
    reservation = _reserve(moto, count=2, team=team)
    spec = make_nodeclass(
        role=node_role(moto),
        capacity_reservation_selector_terms=(
            nc.CapacityReservationSelectorTerm(tags={"team": team}),
        ),
    )
    _reserved_nodeclass(kit, await resolve(spec))
    first = await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="e-1"))
    assert first.metadata.labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID] == reservation
    assert await kit.provider.is_drifted(first) is None

    boto_client(moto, "ec2").cancel_capacity_reservation(CapacityReservationId=reservation)
    kit.clock.step(datetime.timedelta(minutes=1))  # karpy reads the reservation's room again
    after = await kit.provider.create(make_nodeclaim(ALLOW_RESERVED, ONLY_M5, name="e-2"))
    assert after.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"
    # The next status pass drops the ended reservation; its node is not drifted for it (its
    # instance runs on as on-demand, and the capacity-type controller relabels it).
    _reserved_nodeclass(kit, await resolve(spec))
    assert await kit.provider.is_drifted(first) is None
