"""The launch plan, pure: capacity type choice, Karpenter's pre-launch filters, truncation to 60
types, AMI per type and types x zones on one subnet per zone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.kube.common import NodeSelectorOperator, NodeSelectorRequirement
from karpy.apis.v1 import labels as wk
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import EMPTY, Resources
from karpy_aws.apis import ec2nodeclass_status as nc_status
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.capacityreservations import (
    RESERVED_PRICE_DIVISOR,
    with_reserved_offerings,
)
from karpy_aws.providers.instance import fleet_request
from karpy_aws.providers.instancetype.instancetypes import (
    InstanceTypeInfo,
    KubeletSettings,
    allocatable,
    capacity,
    instance_labels,
    overhead,
)
from karpy_aws.providers.instancetype.offerings import AWSInstanceType, Offering
from karpy_aws.providers.launch import (
    MAX_INSTANCE_TYPES,
    LaunchPlan,
    as_candidates,
    choose_capacity_type,
    compatible_candidates,
    min_values_shortfall,
    on_demand_fallback_warning,
    plan_launch,
)
from karpy_aws.providers.network import Subnet

SPOT, OD, RESERVED = wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_RESERVED
ZONES = ("zone-a", "zone-b")
SUBNETS = {
    z: Subnet(id=f"subnet-{z}", zone=z, zone_id=f"id-{z}", available_ip_count=100, vpc_id="vpc")
    for z in ZONES
}
AMIS = tuple(
    nc_status.AMI(
        id=f"ami-{arch}",
        requirements=(
            NodeSelectorRequirement(
                key=wk.LABEL_ARCH, operator=NodeSelectorOperator.IN, values=(arch,)
            ),
        ),
    )
    for arch in (wk.ARCH_AMD64, wk.ARCH_ARM64)
)


def itype(
    name: str,
    *,
    on_demand: float,
    spot: float | None = None,
    reserved: bool = False,
    arch: str = wk.ARCH_AMD64,
    gpus: int = 0,
    metal: bool = False,
    vcpus: int = 2,
    unavailable: frozenset[tuple[str, str]] = frozenset(),
) -> AWSInstanceType:
    info = InstanceTypeInfo(
        name=name,
        vcpus=vcpus,
        memory_mib=4096 * vcpus,
        architectures=(arch,),
        hypervisor="" if metal else "nitro",
        bare_metal=metal,
        max_network_interfaces=3,
        ipv4_per_interface=10,
        usage_classes=(OD, SPOT),
        gpu_count=gpus,
        gpu_manufacturer="nvidia" if gpus else "",
        gpu_name="t4" if gpus else "",
    )
    cap = capacity(info, pods=29)
    over = overhead(cap, kubelet=KubeletSettings())
    prices = [(OD, on_demand), (SPOT, on_demand * 0.4 if spot is None else spot)]
    if reserved:
        prices.append((RESERVED, on_demand * 0.5))
    return AWSInstanceType(
        name=name,
        labels=instance_labels(info, arch=arch),
        capacity=cap,
        overhead=over,
        allocatable=allocatable(cap, over),
        offerings=tuple(
            Offering(
                zone=z,
                zone_id=f"id-{z}",
                capacity_type=ct,
                price=price,
                available=(ct, z) not in unavailable,
            )
            for z in ZONES
            for ct, price in prices
        ),
        info=info,
    )


def reqs(**by_key: tuple[str, ...]) -> Requirements:
    keys = {
        "ct": wk.LABEL_CAPACITY_TYPE,
        "zone": wk.LABEL_TOPOLOGY_ZONE,
        "it": wk.LABEL_INSTANCE_TYPE,
    }
    return Requirements(Requirement.new(keys[k], "In", v) for k, v in by_key.items())


def plan(types: list[AWSInstanceType], requirements: Requirements | None = None) -> LaunchPlan:
    requirements = requirements if requirements is not None else Requirements()
    candidates = compatible_candidates(as_candidates(types), requirements, EMPTY)
    capacity_type = choose_capacity_type(candidates, requirements)
    return plan_launch(
        candidates, requirements, capacity_type=capacity_type, subnets=SUBNETS, amis=AMIS
    )


@pytest.mark.parametrize(
    ("requirements", "unavailable", "expected"),
    [
        pytest.param(Requirements(), frozenset(), RESERVED, id="reserved-first"),
        pytest.param(reqs(ct=(SPOT, OD)), frozenset(), SPOT, id="spot-when-reserved-not-allowed"),
        pytest.param(
            reqs(ct=(SPOT, OD)),
            frozenset({(SPOT, "zone-a"), (SPOT, "zone-b")}),
            OD,
            id="on-demand-when-no-spot-offered",
        ),
        pytest.param(
            reqs(ct=(SPOT, OD), zone=("zone-a",)),
            frozenset({(SPOT, "zone-a")}),
            OD,
            id="spot-offered-only-outside-the-allowed-zone",
        ),
        pytest.param(reqs(ct=(OD,)), frozenset(), OD, id="on-demand-only"),
    ],
)
def test_capacity_type_is_chosen_as_karpenter_does(
    requirements: Requirements, unavailable: frozenset[tuple[str, str]], expected: str
) -> None:
    types = [itype("m5.large", on_demand=0.1, reserved=True, unavailable=unavailable)]
    candidates = compatible_candidates(as_candidates(types), requirements, EMPTY)
    assert choose_capacity_type(candidates, requirements) == expected


def test_on_demand_fallback_warns_below_five_types() -> None:
    few = compatible_candidates(
        as_candidates([itype(f"m{i}.large", on_demand=0.1) for i in range(4)]),
        Requirements(),
        EMPTY,
    )
    many = compatible_candidates(
        as_candidates([itype(f"m{i}.large", on_demand=0.1) for i in range(5)]),
        Requirements(),
        EMPTY,
    )
    assert on_demand_fallback_warning(OD, Requirements(), few)
    assert not on_demand_fallback_warning(OD, Requirements(), many)
    assert not on_demand_fallback_warning(OD, reqs(ct=(OD,)), few)
    assert not on_demand_fallback_warning(SPOT, Requirements(), few)


def test_at_most_sixty_types_the_cheapest() -> None:
    types = [itype(f"c{i:03d}.large", on_demand=1.0 + i / 100) for i in range(80)]
    result = plan(types, reqs(ct=(OD,)))
    names = {o.instance_type for g in result.groups for o in g.overrides}
    assert names == {f"c{i:03d}.large" for i in range(MAX_INSTANCE_TYPES)}
    overrides = [o for g in result.groups for o in g.overrides]
    assert len(overrides) == MAX_INSTANCE_TYPES * len(ZONES)
    assert [o.price for o in overrides] == sorted(o.price for o in overrides)


def test_exotic_types_only_when_nothing_else_fits() -> None:
    plain = itype("m5.large", on_demand=0.2)
    gpu = itype("g4dn.xlarge", on_demand=0.1, gpus=1)
    metal = itype("m5.metal", on_demand=0.05, metal=True)
    chosen = {c.name for c in plan([plain, gpu, metal], reqs(ct=(OD,))).candidates}
    assert chosen == {"m5.large"}
    chosen = {c.name for c in plan([gpu, metal], reqs(ct=(OD,))).candidates}
    assert chosen == {"g4dn.xlarge", "m5.metal"}


def test_spot_dearer_than_the_cheapest_on_demand_is_left_out() -> None:
    cheap = itype("c5.large", on_demand=0.08)
    dear = itype("m5.xlarge", on_demand=0.2, spot=0.09)
    assert {c.name for c in plan([cheap, dear], reqs(ct=(SPOT,))).candidates} == {"c5.large"}


def test_each_type_gets_its_architectures_ami_and_unserved_types_are_dropped() -> None:
    x86 = itype("m5.large", on_demand=0.1)
    arm = itype("m6g.large", on_demand=0.08, arch=wk.ARCH_ARM64)
    result = plan_launch(
        compatible_candidates(as_candidates([x86, arm]), Requirements(), EMPTY),
        Requirements(),
        capacity_type=OD,
        subnets=SUBNETS,
        amis=AMIS,
    )
    images = {o.instance_type: o.image_id for g in result.groups for o in g.overrides}
    assert images == {"m5.large": "ami-amd64", "m6g.large": "ami-arm64"}
    x86_only = plan_launch(
        compatible_candidates(as_candidates([x86, arm]), Requirements(), EMPTY),
        Requirements(),
        capacity_type=OD,
        subnets=SUBNETS,
        amis=AMIS[:1],
    )
    assert {c.name for c in x86_only.candidates} == {"m5.large"}


def test_requests_that_do_not_fit_leave_no_candidates() -> None:
    small = itype("t3.small", on_demand=0.02, vcpus=2)
    big = itype("m5.4xlarge", on_demand=0.8, vcpus=16)
    needs = Resources.of({"cpu": "8"})
    assert [
        c.name for c in compatible_candidates(as_candidates([small, big]), Requirements(), needs)
    ] == ["m5.4xlarge"]


@given(
    st.lists(
        st.tuples(
            st.floats(0.01, 5.0),
            st.floats(0.001, 5.0),
            st.sets(st.sampled_from([(c, z) for c in (SPOT, OD) for z in ZONES])),
            st.sampled_from([wk.ARCH_AMD64, wk.ARCH_ARM64]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([(), (SPOT,), (OD,), (SPOT, OD)]),
    st.sampled_from([(), ("zone-a",), ZONES]),
)
def test_every_override_is_an_allowed_available_offering_on_its_zones_subnet(
    shapes: list[tuple[float, float, set[tuple[str, str]], str]],
    capacity_types: tuple[str, ...],
    zones: tuple[str, ...],
) -> None:
    types = [
        itype(f"t{i}.large", on_demand=od, spot=spot, unavailable=frozenset(gone), arch=arch)
        for i, (od, spot, gone, arch) in enumerate(shapes)
    ]
    wanted = {}
    if capacity_types:
        wanted["ct"] = capacity_types
    if zones:
        wanted["zone"] = zones
    requirements = reqs(**wanted)
    result = plan(types, requirements)
    by_name = {t.name: t for t in types}
    assert result.capacity_type != RESERVED
    if capacity_types and result.groups:  # nothing launchable: the provider stops earlier
        assert result.capacity_type in capacity_types
    for group in result.groups:
        assert [o.price for o in group.overrides] == sorted(o.price for o in group.overrides)
        for o in group.overrides:
            assert not zones or o.zone in zones
            assert o.subnet_id == SUBNETS[o.zone].id
            offering = next(
                x
                for x in by_name[o.instance_type].offerings
                if x.zone == o.zone and x.capacity_type == result.capacity_type
            )
            assert offering.available
            assert offering.price == o.price
            arch = by_name[o.instance_type].labels[wk.LABEL_ARCH]
            assert o.image_id == f"ami-{arch}"


def test_min_values_keep_exotic_and_dear_spot_types_and_are_checked() -> None:
    plain = itype("m5.large", on_demand=0.1)
    gpu = itype("g4dn.xlarge", on_demand=0.5, gpus=1)
    dear = itype("m5.xlarge", on_demand=0.2, spot=0.15)
    flexible = Requirements([Requirement.new(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=3)]).add(
        Requirement.new(wk.LABEL_CAPACITY_TYPE, "In", [SPOT])
    )
    chosen = plan([plain, gpu, dear], flexible)
    assert {c.name for c in chosen.candidates} == {"m5.large", "g4dn.xlarge", "m5.xlarge"}
    assert min_values_shortfall(chosen.candidates, flexible) is None
    too_few = plan([plain, dear], flexible)
    message = min_values_shortfall(too_few.candidates, flexible)
    assert message is not None
    assert "needs at least 3 values (minValues)" in message
    assert "['m5.large', 'm5.xlarge']" in message


@pytest.mark.parametrize(
    ("key", "operator", "values", "expected"),
    [
        pytest.param(
            awslabels.LABEL_AWS_INSTANCE_GPU_COUNT, "Exists", (), {"g4dn.xlarge"}, id="gpu"
        ),
        pytest.param(
            awslabels.LABEL_AWS_INSTANCE_GPU_COUNT, "DoesNotExist", (), {"m5.large"}, id="no-gpu"
        ),
        pytest.param(
            awslabels.LABEL_AWS_INSTANCE_GPU_NAME, "NotIn", ("t4",), {"m5.large"}, id="not-that-gpu"
        ),
        pytest.param(awslabels.LABEL_AWS_INSTANCE_LOCAL_NVME, "Gt", ("0",), set(), id="nvme"),
    ],
)
def test_types_without_an_accelerator_label_do_not_meet_a_requirement_on_it(
    key: str, operator: str, values: tuple[str, ...], expected: set[str]
) -> None:
    types = [itype("m5.large", on_demand=0.1), itype("g4dn.xlarge", on_demand=0.5, gpus=1)]
    wanted = Requirements([Requirement.new(key, operator, values)])
    chosen = compatible_candidates(as_candidates(types), wanted, EMPTY)
    assert {c.name for c in chosen} == expected


def test_reserved_launches_one_template_per_reservation_and_capacity_blocks_apart() -> None:
    base = itype("m5.large", on_demand=0.1)
    reservations = (
        nc_status.CapacityReservation(
            id="cr-0000000000000000a",
            availability_zone="zone-a",
            instance_type="m5.large",
            owner_id="123456789012",
            instance_match_criteria="targeted",
        ),
        nc_status.CapacityReservation(
            id="cr-0000000000000000b",
            availability_zone="zone-b",
            instance_type="m5.large",
            owner_id="123456789012",
            instance_match_criteria="open",
        ),
        nc_status.CapacityReservation(
            id="cr-0000000000000000c",
            availability_zone="zone-a",
            instance_type="m5.large",
            owner_id="123456789012",
            instance_match_criteria="targeted",
            reservation_type=nc_status.CapacityReservationType.CAPACITY_BLOCK,
        ),
    )
    room = {"cr-0000000000000000a": 2, "cr-0000000000000000b": 1, "cr-0000000000000000c": 4}
    (typed,) = with_reserved_offerings(
        [base], reservations[:2], available=room.__getitem__, zone_ids={}
    )
    result = plan([typed])
    assert result.capacity_type == RESERVED
    assert [g.capacity_reservation_id for g in result.groups] == [
        "cr-0000000000000000a",
        "cr-0000000000000000b",
    ]
    assert [[o.zone for o in g.overrides] for g in result.groups] == [["zone-a"], ["zone-b"]]
    assert result.groups[0].overrides[0].price == pytest.approx(0.1 / RESERVED_PRICE_DIVISOR)
    request = fleet_request(result, templates={g.key: str(g.key) for g in result.groups}, tags={})
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"

    # A full reservation offers nothing; only the other one is launched into.
    room["cr-0000000000000000a"] = 0
    (typed,) = with_reserved_offerings(
        [base], reservations[:2], available=room.__getitem__, zone_ids={}
    )
    assert [g.capacity_reservation_id for g in plan([typed]).groups] == ["cr-0000000000000000b"]

    # Capacity blocks launch in their own market, never in one fleet with plain reservations.
    (blocks,) = with_reserved_offerings(
        [base], reservations[2:], available=room.__getitem__, zone_ids={}
    )
    block_plan = plan([blocks])
    assert block_plan.capacity_block
    request = fleet_request(
        block_plan, templates={g.key: str(g.key) for g in block_plan.groups}, tags={}
    )
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    room["cr-0000000000000000a"] = 2
    (mixed,) = with_reserved_offerings(
        [base], reservations, available=room.__getitem__, zone_ids={}
    )
    kinds = {g.capacity_reservation_type for g in plan([mixed]).groups}
    assert len(kinds) == 1
