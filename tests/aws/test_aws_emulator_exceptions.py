"""The AWS answers karpy's tests write by hand beside moto, each proven on its own.

moto stands in for AWS, and five things it does not do as AWS does are supplied by hand
(docs/development.md lists them as deliberate exceptions): the spot-price feed (moto quotes one
price for every type and zone), the Pricing API (moto has none), CreateFleet's ClientToken
(moto ignores it), fleet instances' security groups (moto drops the launch template's) and
capacity reservations (moto has none). A hand-written answer is only as good as its likeness
to AWS: the answered feeds and the reservations are checked against botocore's model of the
operation's output (which AWS's own answers follow), and the emulator patches against what EC2
documents.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.model import Shape

from karpy_aws_emulator.idempotency import MISMATCH_CODE
from karpy_aws_emulator.world import AMI_IDS

from .conftest import REGION, FaultInjector, Moto, ProviderKit, boto_client
from .test_aws_pricing import _product

pytestmark = pytest.mark.aws


def _problems(value: Any, shape: Shape, path: str) -> list[str]:
    """Where `value` departs from botocore's output `shape` (keys it does not have, wrong
    types); empty when it is something AWS could have sent."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a structure"]
        found = []
        for key, item in value.items():
            member = shape.members.get(key)
            if member is None:
                found.append(f"{path}.{key}: no such member")
            else:
                found += _problems(item, member, f"{path}.{key}")
        return found
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        member = shape.member
        return [p for i, item in enumerate(value) for p in _problems(item, member, f"{path}[{i}]")]
    expected: dict[str, tuple[type, ...]] = {
        "string": (str,),
        "timestamp": (datetime.datetime,),
        "integer": (int,),
        "long": (int,),
        "boolean": (bool,),
        "double": (float, int),
        "float": (float, int),
    }
    if kind in expected and not isinstance(value, expected[kind]):
        return [f"{path}: {type(value).__name__}, not {kind}"]
    return []


def _output(service: str, operation: str) -> Shape:
    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).output_shape
    assert shape is not None
    return shape


def test_the_spot_price_feed_is_one_aws_could_send(kit: ProviderKit, faults: FaultInjector) -> None:
    (answer,) = faults.answers["DescribeSpotPriceHistory"]
    rows = answer["SpotPriceHistory"]
    assert rows
    assert _problems(answer, _output("ec2", "DescribeSpotPriceHistory"), "answer") == []
    # The reason it is written by hand: moto quotes one price for every type and zone, so no
    # test could tell the cheapest offering from another.
    prices = {(r["InstanceType"], r["AvailabilityZone"]): float(r["SpotPrice"]) for r in rows}
    assert prices[("m5.large", "us-west-2b")] > prices[("m5.large", "us-west-2a")]
    assert prices[("m5.large", "us-west-2c")] < prices[("m5.large", "us-west-2a")]
    assert prices[("t3.micro", "us-west-2a")] < prices[("m5.large", "us-west-2a")]


def test_moto_quotes_one_spot_price_for_everything(moto: Moto) -> None:
    """Why the feed above exists; should moto learn real prices, this fails and the exception
    can go."""
    rows = boto_client(moto, "ec2").describe_spot_price_history(
        InstanceTypes=["m5.large", "t3.micro"]
    )["SpotPriceHistory"]
    assert len({r["SpotPrice"] for r in rows}) == 1


def test_the_pricing_answer_is_one_aws_could_send() -> None:
    answer = {"PriceList": [_product("m5.large", "0.096")]}
    assert _problems(answer, _output("pricing", "GetProducts"), "answer") == []


def test_moto_has_no_pricing_api(moto: Moto) -> None:
    with pytest.raises(ClientError):
        boto_client(moto, "pricing").get_products(ServiceCode="AmazonEC2", MaxResults=1)


def test_the_shape_check_finds_a_departure() -> None:
    """The check above is not vacuous: a misspelt member and a wrong type are both found."""
    answer = {"SpotPriceHistory": [{"InstanceType": "m5.large", "SpotPrize": 1.0}]}
    assert _problems(answer, _output("ec2", "DescribeSpotPriceHistory"), "answer") == [
        "answer.SpotPriceHistory[0].SpotPrize: no such member"
    ]
    wrong = {"SpotPriceHistory": [{"SpotPrice": 0.1}]}
    assert _problems(wrong, _output("ec2", "DescribeSpotPriceHistory"), "answer") == [
        "answer.SpotPriceHistory[0].SpotPrice: float, not string"
    ]


def _template(moto: Moto, data: dict[str, Any]) -> str:
    ec2 = boto_client(moto, "ec2")
    created = ec2.create_launch_template(
        LaunchTemplateName=f"exceptions-{secrets.token_hex(4)}",
        LaunchTemplateData={"ImageId": AMI_IDS["al2023x86new"], **data},
    )
    return str(created["LaunchTemplate"]["LaunchTemplateId"])


def _fleet(moto: Moto, template: str, *, token: str, count: int = 1) -> dict[str, Any]:
    answer: dict[str, Any] = boto_client(moto, "ec2").create_fleet(
        Type="instant",
        ClientToken=token,
        TargetCapacitySpecification={
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                "Overrides": [{"InstanceType": "t3.micro", "SubnetId": moto.subnets["a"]}],
            }
        ],
    )
    return answer


def _instance_ids(fleet: dict[str, Any]) -> list[str]:
    return sorted(i for group in fleet["Instances"] for i in group["InstanceIds"])


def test_create_fleet_honours_the_client_token(moto: Moto) -> None:
    """As EC2: a repeated token returns the first answer and launches nothing; the same token
    with other parameters is refused."""
    template = _template(moto, {})
    token = f"karpy-{secrets.token_hex(8)}"
    first = _fleet(moto, template, token=token)
    again = _fleet(moto, template, token=token)
    assert again["FleetId"] == first["FleetId"]
    assert _instance_ids(again) == _instance_ids(first)
    assert len(_instance_ids(first)) == 1
    with pytest.raises(ClientError) as refused:
        _fleet(moto, template, token=token, count=2)
    assert refused.value.response["Error"]["Code"] == MISMATCH_CODE
    other = _fleet(moto, template, token=f"karpy-{secrets.token_hex(8)}")
    assert set(_instance_ids(other)).isdisjoint(_instance_ids(first))


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("SecurityGroupIds", id="security-group-ids"),
        pytest.param("NetworkInterfaces", id="network-interface"),
    ],
)
def test_fleet_instances_take_their_launch_templates_security_groups(
    moto: Moto, where: str
) -> None:
    groups = [moto.security_groups["nodes"], moto.security_groups["extra"]]
    data: dict[str, Any] = (
        {"SecurityGroupIds": groups}
        if where == "SecurityGroupIds"
        else {
            "NetworkInterfaces": [
                {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": groups}
            ]
        }
    )
    fleet = _fleet(moto, _template(moto, data), token=f"karpy-{secrets.token_hex(8)}")
    (instance_id,) = _instance_ids(fleet)
    described = boto_client(moto, "ec2").describe_instances(InstanceIds=[instance_id])
    (instance,) = described["Reservations"][0]["Instances"]
    assert sorted(g["GroupId"] for g in instance["SecurityGroups"]) == sorted(groups)
    assert instance["Placement"]["AvailabilityZone"].startswith(REGION)


def test_capacity_reservations_are_ones_aws_could_send_and_fleets_fill_them(moto: Moto) -> None:
    ec2 = boto_client(moto, "ec2")
    created = ec2.create_capacity_reservation(
        InstanceType="t3.micro",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=f"{REGION}a",
        InstanceCount=1,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    reservation = created["CapacityReservationId"]
    answer = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])
    answer.pop("ResponseMetadata")
    assert _problems(answer, _output("ec2", "DescribeCapacityReservations"), "answer") == []
    assert answer["CapacityReservations"][0]["AvailableInstanceCount"] == 1
    # The reason it is written by hand: moto has no reservations, and its fleets ignore the
    # template's reservation, so nothing could fill one or be refused for want of room.
    template = _template(
        moto,
        {
            "CapacityReservationSpecification": {
                "CapacityReservationTarget": {"CapacityReservationId": reservation}
            }
        },
    )
    first = _fleet(moto, template, token=f"karpy-{secrets.token_hex(8)}")
    (instance_id,) = _instance_ids(first)
    (described,) = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])[
        "CapacityReservations"
    ]
    assert described["AvailableInstanceCount"] == 0
    full = _fleet(moto, template, token=f"karpy-{secrets.token_hex(8)}")
    assert _instance_ids(full) == []
    assert {e["ErrorCode"] for e in full["Errors"]} == {"ReservationCapacityExceeded"}
    # Terminating the instance gives its slot back, as on EC2.
    ec2.terminate_instances(InstanceIds=[instance_id])
    again = _fleet(moto, template, token=f"karpy-{secrets.token_hex(8)}")
    assert len(_instance_ids(again)) == 1
    ec2.cancel_capacity_reservation(CapacityReservationId=reservation)
    cancelled = _fleet(moto, template, token=f"karpy-{secrets.token_hex(8)}")
    assert {e["ErrorCode"] for e in cancelled["Errors"]} == {"ReservationCapacityExceeded"}
