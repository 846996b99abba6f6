"""The emulator's pressure layer answers as AWS does under pressure, for the caller it presses.

`karpy_aws_emulator.pressure` stands in front of moto for tests and benchmarks that run karpy
as a process of its own (tests/e2e/test_aws_pressure.py, benchmarks/faults.py). Its answers
are only useful if botocore reads them as it reads AWS's: each protocol's error is parsed to its
code (and so retried by botocore's policy), a pool without capacity is reported in CreateFleet's
`Errors` while the other overrides launch, and a plan presses its caller and nobody else.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from karpy_aws_emulator.pressure import requests_per_second
from karpy_aws_emulator.world import AMI_IDS

from .conftest import REGION, Moto, boto_client, pressure_plan

pytestmark = pytest.mark.aws


@pytest.fixture
def caller(moto: Moto) -> Iterator[str]:
    """An access key of its own; the plan is cleared after the test."""
    yield f"AKIAPRESS{secrets.token_hex(6).upper()}"
    pressure_plan(moto, "DELETE")


def _client(moto: Moto, service: str, key: str) -> Any:
    return botocore.session.get_session().create_client(
        service,
        region_name=REGION,
        endpoint_url=moto.endpoint,
        aws_access_key_id=key,
        aws_secret_access_key="pressure",
        config=Config(retries={"total_max_attempts": 1}),
    )


@pytest.mark.parametrize(
    ("service", "call"),
    [
        pytest.param("ec2", lambda c: c.describe_availability_zones(), id="ec2-query"),
        pytest.param("iam", lambda c: c.list_roles(), id="iam-query"),
        pytest.param("ssm", lambda c: c.describe_parameters(), id="ssm-json"),
        pytest.param("sqs", lambda c: c.list_queues(), id="sqs-json"),
    ],
)
def test_an_injected_error_is_read_as_the_services_own(
    moto: Moto, caller: str, service: str, call: Any
) -> None:
    pressure_plan(moto, "PUT", {"rules": [{"caller": caller, "code": "Throttling", "status": 400}]})
    with pytest.raises(ClientError) as refused:
        call(_client(moto, service, caller))
    assert refused.value.response["Error"]["Code"] == "Throttling"
    # Another caller is spared.
    call(_client(moto, service, "AKIASPARED"))
    records = pressure_plan(moto, "GET")["records"]
    assert [(r["caller"], r["service"], r["injected"]) for r in records] == [
        (caller, service, "Throttling"),
        ("AKIASPARED", service, ""),
    ]


def test_a_fraction_of_calls_fail_within_the_window(moto: Moto, caller: str) -> None:
    rule = {"caller": caller, "code": "RequestLimitExceeded", "status": 503, "fraction": 0.5}
    pressure_plan(moto, "PUT", {"seed": 3, "rules": [rule]})
    ec2 = _client(moto, "ec2", caller)
    codes = []
    for _ in range(40):
        try:
            ec2.describe_availability_zones()
        except ClientError as error:
            codes.append(error.response["Error"]["Code"])
    assert set(codes) == {"RequestLimitExceeded"}
    assert 10 <= len(codes) <= 30
    records = pressure_plan(moto, "GET")["records"]
    assert len(records) == 40
    assert sum(requests_per_second(records, window=3600)) == 40
    # A window that has closed presses no more.
    pressure_plan(moto, "PUT", {"rules": [{**rule, "fraction": 1.0, "start": 0, "end": 0}]})
    ec2.describe_availability_zones()


def test_a_pool_without_capacity_is_reported_and_the_others_launch(moto: Moto, caller: str) -> None:
    pressure_plan(
        moto,
        "PUT",
        {"ice": [{"instanceType": "t3.micro", "zone": "us-west-2a", "capacityType": "on-demand"}]},
    )
    ec2 = boto_client(moto, "ec2")
    template = ec2.create_launch_template(
        LaunchTemplateName=f"pressure-{secrets.token_hex(4)}",
        LaunchTemplateData={"ImageId": AMI_IDS["al2023x86new"]},
    )["LaunchTemplate"]["LaunchTemplateId"]

    def fleet(types: list[str]) -> dict[str, Any]:
        answer: dict[str, Any] = ec2.create_fleet(
            Type="instant",
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "on-demand",
            },
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": template,
                        "Version": "$Latest",
                    },
                    "Overrides": [
                        {
                            "InstanceType": t,
                            "SubnetId": moto.subnets["a"],
                            "AvailabilityZone": "us-west-2a",
                        }
                        for t in types
                    ],
                }
            ],
        )
        return answer

    both = fleet(["t3.micro", "t3.small"])
    (error,) = both["Errors"]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"] == "t3.micro"
    assert [group["InstanceType"] for group in both["Instances"]] == ["t3.small"]
    alone = fleet(["t3.micro"])
    assert alone["Instances"] == []
    assert [e["ErrorCode"] for e in alone["Errors"]] == ["InsufficientInstanceCapacity"]
