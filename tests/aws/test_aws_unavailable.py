"""The unavailable-offerings cache, fed by CreateFleet capacity errors from the fault injector."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from karpy.runtime.clock import FakeClock
from karpy_aws.errors import SPOT_SERVICE_LINKED_ROLE_CODE
from karpy_aws.providers.instancetype.unavailable import (
    UNAVAILABLE_OFFERINGS_TTL,
    FleetError,
    OfferingKey,
    UnavailableOfferings,
    parse_fleet_errors,
)
from karpy_aws.session import AWSSession

from .conftest import AMI_IDS, FaultInjector, Moto

pytestmark = pytest.mark.aws

SPOT = "spot"


def test_entries_expire_after_three_minutes_and_bump_sequence_numbers() -> None:
    clock = FakeClock()
    cache = UnavailableOfferings(clock)
    assert datetime.timedelta(minutes=3) == UNAVAILABLE_OFFERINGS_TTL
    cache.mark_unavailable(
        reason="InsufficientInstanceCapacity",
        capacity_type=SPOT,
        instance_type="m5.large",
        zone="us-west-2a",
    )
    assert cache.seq_num == 1
    assert cache.instance_type_seq_num("m5.large") == 1
    assert cache.instance_type_seq_num("c5.large") == 0
    assert cache.is_unavailable(capacity_type=SPOT, instance_type="m5.large", zone="us-west-2a")
    assert not cache.is_unavailable(
        capacity_type="on-demand", instance_type="m5.large", zone="us-west-2a"
    )
    assert {str(k) for k in cache.unavailable()} == {"spot:m5.large:us-west-2a"}
    clock.step(datetime.timedelta(minutes=2, seconds=59))
    assert cache.is_unavailable(capacity_type=SPOT, instance_type="m5.large", zone="us-west-2a")
    clock.step(datetime.timedelta(seconds=1))
    assert not cache.is_unavailable(capacity_type=SPOT, instance_type="m5.large", zone="us-west-2a")
    assert cache.cleanup() == 1
    assert cache.seq_num == 2
    assert cache.unavailable() == frozenset()


def test_spot_service_linked_role_error_blocks_all_spot() -> None:
    cache = UnavailableOfferings(FakeClock())
    errors = [
        FleetError(
            code=SPOT_SERVICE_LINKED_ROLE_CODE,
            message="m",
            instance_type=None,
            zone=None,
            subnet_id=None,
        ),
        FleetError(
            code="InvalidParameterValue", message="m", instance_type="x", zone="z", subnet_id=None
        ),
    ]
    assert cache.mark_fleet_errors(errors, capacity_type=SPOT) == 1
    assert cache.is_unavailable(capacity_type=SPOT, instance_type="any.type", zone="any-zone")
    assert not cache.is_unavailable(capacity_type="on-demand", instance_type="x", zone="z")


async def _launch_template(session: AWSSession, name: str) -> None:
    ec2 = await session.client("ec2")
    await ec2.call(
        "CreateLaunchTemplate",
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": AMI_IDS["al2023x86new"]},
    )


def _fleet(name: str, overrides: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "Type": "instant",
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": SPOT,
        },
        "SpotOptions": {"AllocationStrategy": "price-capacity-optimized"},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": t, "AvailabilityZone": z, "SubnetId": s}
                    for t, z, s in overrides
                ],
            }
        ],
    }


async def test_fleet_capacity_errors_mark_offerings_and_the_next_launch_avoids_them(
    session: AWSSession, faults: FaultInjector, moto: Moto
) -> None:
    await _launch_template(session, "ice-partial")
    ec2 = await session.client("ec2")
    cache = UnavailableOfferings(FakeClock())
    candidates = [
        ("m5.large", "us-west-2a", moto.subnets["a"]),
        ("m5.large", "us-west-2b", moto.subnets["b"]),
    ]
    faults.ice("m5.large", "us-west-2a")

    first = await ec2.call("CreateFleet", **_fleet("ice-partial", candidates))
    errors = parse_fleet_errors(first.get("Errors", []))
    assert [(e.code, e.instance_type, e.zone) for e in errors] == [
        ("InsufficientInstanceCapacity", "m5.large", "us-west-2a")
    ]
    assert cache.mark_fleet_errors(errors, capacity_type=SPOT) == 1
    assert cache.unavailable() == {OfferingKey(SPOT, "m5.large", "us-west-2a")}

    remaining = [
        c
        for c in candidates
        if not cache.is_unavailable(capacity_type=SPOT, instance_type=c[0], zone=c[1])
    ]
    second = await ec2.call("CreateFleet", **_fleet("ice-partial", remaining))
    assert "Errors" not in second or not second["Errors"]
    (instance,) = second["Instances"]
    assert instance["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == "us-west-2b"


async def test_fleet_with_every_override_out_of_capacity_launches_nothing(
    session: AWSSession, faults: FaultInjector, moto: Moto
) -> None:
    await _launch_template(session, "ice-all")
    ec2 = await session.client("ec2")
    faults.ice("c5.large", "us-west-2c")
    response = await ec2.call(
        "CreateFleet", **_fleet("ice-all", [("c5.large", "us-west-2c", moto.subnets["c"])])
    )
    assert response["Instances"] == []
    (error,) = parse_fleet_errors(response["Errors"])
    assert error.unfulfillable_capacity
    assert "CreateFleet" not in faults.sent  # answered in front of moto
