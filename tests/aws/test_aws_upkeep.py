"""The provider's upkeep loop under ``run()`` on moto: the cluster's launch templates adopted
once, unused ones deleted as the clock moves, failures retried. Plus the small pure pieces the
loops use: the apiserver's version string and the status merge patch."""

from __future__ import annotations

import asyncio
import datetime
import secrets
from collections.abc import Callable

import pytest

from karpy.kube.patch import status_patch
from karpy.runtime.backoff import Backoff
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus, SecurityGroup, Subnet
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.cluster import ClusterInfo
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instancetype.offerings import InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.pricing import PriceCache
from karpy_aws.providers.version import check_pinned, parse_version
from karpy_aws.session import AWSSession
from tests.support.providers import run_extension
from tests.support.waiting import eventually

from .conftest import INSTANCE_TYPES, REGION, FaultInjector, Moto, boto_client

pytestmark = pytest.mark.aws


async def _provider(session: AWSSession, clock: FakeClock, cluster: str) -> AWSCloudProvider:
    ec2 = await session.client("ec2")
    unavailable = UnavailableOfferings(clock)
    return AWSCloudProvider(
        Instances(ec2, cluster_name=cluster),
        InstanceTypeCatalog(
            ec2=ec2,
            prices=PriceCache(ec2=ec2, pricing=None, clock=clock, region=REGION),
            unavailable=unavailable,
            clock=clock,
            names=INSTANCE_TYPES,
        ),
        cluster=ClusterInfo(name=cluster, region=REGION, endpoint="https://k.test", ca_bundle="Q"),
        nodeclasses=_NoNodeClasses(),
        launch_templates=LaunchTemplates(ec2, clock),
        unavailable=unavailable,
        clock=clock,
        maintenance_period=0.05,
    )


class _NoNodeClasses:
    async def get(self, name: str) -> None:
        return None


def _templates(moto: Moto, cluster: str) -> list[str]:
    found = boto_client(moto, "ec2").describe_launch_templates(
        Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [cluster]}]
    )
    return [t["LaunchTemplateName"] for t in found["LaunchTemplates"]]


def _earlier_leaders_template(moto: Moto, cluster: str) -> str:
    name = f"karpenter.k8s.aws/{secrets.token_hex(8)}"
    boto_client(moto, "ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"InstanceType": "t3.micro"},
        TagSpecifications=[
            {
                "ResourceType": "launch-template",
                "Tags": [{"Key": "karpenter.k8s.aws/cluster", "Value": cluster}],
            }
        ],
    )
    return name


async def _until(check: Callable[[], bool], task: asyncio.Task[None], *, what: str) -> None:
    async def probe() -> bool:
        assert not task.done(), "run() ended on its own"
        return check()

    await eventually(probe, within=30, interval=0.02, what=what)


async def test_run_adopts_templates_once_then_maintains_and_retries(
    session: AWSSession, telemetry: Telemetry, faults: FaultInjector, moto: Moto
) -> None:
    cluster = f"upkeep-{secrets.token_hex(4)}"
    left = _earlier_leaders_template(moto, cluster)
    clock = FakeClock()
    provider = await _provider(session, clock, cluster)
    # The first catalog read fails: the pass is retried, and leading is not started twice.
    faults.fail("DescribeInstanceTypes", "RequestLimitExceeded", times=1)
    task = asyncio.create_task(
        run_extension(
            provider.extension(), telemetry=telemetry, backoff=Backoff(base=0.05, cap=0.2)
        )
    )
    try:
        await _until(
            lambda: faults.sent.count("DescribeInstanceTypes") >= 2, task, what="a second pass"
        )
        assert _templates(moto, cluster) == [left]  # adopted, not yet unused for a minute
        clock.step(datetime.timedelta(minutes=2))
        await _until(lambda: not _templates(moto, cluster), task, what="the template deleted")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    hydrations = [
        r
        for r in faults.requests.get("DescribeLaunchTemplates", [])
        if r.get("Filters", [{}])[0].get("Values") == [cluster]
    ]
    assert len(hydrations) == 1
    assert faults.requests["DeleteLaunchTemplate"][-1]["LaunchTemplateName"] == left


async def test_a_provider_built_alone_declares_its_kind_and_upkeep(session: AWSSession) -> None:
    bare = await _provider(session, FakeClock(), "c")
    extension = bare.extension()
    assert extension.kinds == (EC2NODECLASSES,)
    assert [c.name for c in extension.controllers] == ["providers.maintenance"]


@pytest.mark.parametrize(
    ("body", "version"),
    [
        pytest.param({"major": "1", "minor": "33", "gitVersion": "v1.33.13"}, "1.33", id="plain"),
        pytest.param(
            {"major": "1", "minor": "31+", "gitVersion": "v1.31.4-eks-a"}, "1.31", id="eks"
        ),
        pytest.param({"major": "", "minor": "", "gitVersion": "v1.30.2"}, "1.30", id="git"),
    ],
)
def test_the_apiservers_version_becomes_major_minor(body: dict[str, str], version: str) -> None:
    assert parse_version(body) == version


def test_an_unreadable_version_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"no major\.minor"):
        parse_version({"gitVersion": "dev"})
    with pytest.raises(ConfigurationError, match=r"1\.<minor>"):
        check_pinned("1.31.2")


def test_the_status_patch_clears_what_is_no_longer_resolved() -> None:
    old = EC2NodeClassStatus(
        subnets=(Subnet(id="subnet-1", zone="us-west-2a"),),
        security_groups=(SecurityGroup(id="sg-1"),),
        instance_profile="profile",
    )
    new = EC2NodeClassStatus(security_groups=(SecurityGroup(id="sg-2"),))
    assert status_patch(old, new) == {
        "status": {"subnets": None, "securityGroups": [{"id": "sg-2"}], "instanceProfile": None}
    }
