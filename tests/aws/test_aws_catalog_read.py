"""The instance-type catalog is read once, however slowly the endpoint answers and however many
callers give up waiting.

DescribeInstanceTypes answers with the whole catalog at once where the endpoint does not page
it (moto), and a busy endpoint takes a long time to build it. A read abandoned at the client's
read timeout, or by a caller's deadline, is asked for again from the start: under load the
answer then never arrives. Here the emulator's pressure layer holds every DescribeInstanceTypes
answer back for longer than the session's read timeout, a first caller gives up before the
answer, and a second one must get the first one's read: one request reaches the server.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from karpy.runtime.clock import FakeClock
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.providers.cluster import ClusterInfo
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instancetype.offerings import CATALOG_READ_TIMEOUT, InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.pricing import PriceCache
from karpy_aws.session import AWSSession, AWSSettings

from .conftest import INSTANCE_TYPES, REGION, FaultInjector, Moto, pressure_plan

pytestmark = pytest.mark.aws

READ_TIMEOUT = 1.0
"""The session's ordinary read timeout, shorter than the held-back answer."""
DELAY = 2.5
"""How long the pressure layer holds each DescribeInstanceTypes answer back."""


@pytest.fixture
def slow_catalog(moto: Moto) -> Iterator[None]:
    """Every DescribeInstanceTypes answered DELAY seconds late; the plan cleared after."""
    pressure_plan(moto, "PUT", {"rules": [{"operation": "DescribeInstanceTypes", "delay": DELAY}]})
    try:
        yield
    finally:
        pressure_plan(moto, "DELETE")


@pytest.fixture
async def impatient(moto: Moto, faults: FaultInjector) -> AsyncIterator[AWSSession]:
    settings = AWSSettings(
        region=REGION,
        endpoint_url=moto.endpoint,
        require_loopback_endpoint=True,
        max_attempts=3,
        read_timeout=READ_TIMEOUT,
        call_timeout=30.0,
    )
    async with AWSSession(settings, hooks=faults.hooks()) as session:
        yield session


async def test_a_slow_catalog_is_read_once_and_shared_by_callers_that_gave_up(
    slow_catalog: None, impatient: AWSSession, faults: FaultInjector, moto: Moto
) -> None:
    clock = FakeClock()
    ec2 = await impatient.client("ec2")
    unavailable = UnavailableOfferings(clock)
    catalog = InstanceTypeCatalog(
        # As the operator builds it: the catalog waits for its answer.
        ec2=await impatient.client("ec2", read_timeout=CATALOG_READ_TIMEOUT),
        prices=PriceCache(ec2=ec2, pricing=None, clock=clock, region=REGION),
        unavailable=unavailable,
        clock=clock,
        names=INSTANCE_TYPES,
    )
    provider = AWSCloudProvider(
        Instances(ec2, cluster_name=f"catalog-{secrets.token_hex(4)}"),
        catalog,
        cluster=ClusterInfo(
            name="catalog", region=REGION, endpoint="https://k.test", ca_bundle="Q"
        ),
        nodeclasses=_NoNodeClasses(),
        launch_templates=LaunchTemplates(ec2, clock),
        unavailable=unavailable,
        clock=clock,
    )
    try:
        # The first caller's deadline ends long before the answer comes.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(DELAY / 5):
                await provider.maintain()
        assert not catalog.loaded
        await provider.maintain()  # joins the read in flight
        assert catalog.loaded
        assert catalog.info("m5.large") is not None
        assert faults.sent.count("DescribeInstanceTypes") == 1
        served = [
            r
            for r in pressure_plan(moto, "GET")["records"]
            if r["operation"] == "DescribeInstanceTypes"
        ]
        assert len(served) == 1, served
    finally:
        await provider.aclose()


class _NoNodeClasses:
    async def get(self, name: str) -> None:
        return None
