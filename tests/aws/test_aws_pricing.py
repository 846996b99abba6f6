"""Pricing: Pricing API parsing, latest spot per type and zone, and the estimated fallback."""

from __future__ import annotations

import datetime
import logging

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime.clock import FakeClock
from karpy_aws.providers.pricing import (
    SPOT_FALLBACK_RATIO,
    InstanceShape,
    PriceCache,
    PriceSource,
    estimate_on_demand,
    is_constant_feed,
    latest_spot_prices,
    parse_price_list,
    pricing_endpoint_region,
)
from karpy_aws.session import AWSSession

from .conftest import REGION, FaultInjector

pytestmark = pytest.mark.aws

SHAPES = (
    [
        InstanceShape(name=f"m5.{size}", vcpus=cpu, memory_mib=cpu * 4096, arch="amd64")
        for size, cpu in [("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16)]
    ]
    + [
        InstanceShape(name=f"c6g.{size}", vcpus=cpu, memory_mib=cpu * 2048, arch="arm64")
        for size, cpu in [("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16)]
    ]
    + [
        InstanceShape(name=f"r6i.{size}", vcpus=cpu, memory_mib=cpu * 8192, arch="amd64")
        for size, cpu in [("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16)]
    ]
)


def _product(instance_type: str, usd: str) -> str:
    return orjson.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type, "regionCode": REGION}},
            "terms": {
                "OnDemand": {
                    "SKU.JRTCKXETXF": {
                        "priceDimensions": {
                            "SKU.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                            }
                        }
                    }
                }
            },
        }
    ).decode()


def test_price_list_parsing_skips_products_without_type_or_price() -> None:
    items = [
        _product("m5.large", "0.0960000000"),
        _product("c5.large", "0.0000000000"),
        orjson.dumps({"product": {"attributes": {}}, "terms": {}}).decode(),
    ]
    assert parse_price_list(items) == {"m5.large": 0.096}


def test_latest_spot_price_per_type_and_zone_wins() -> None:
    rows = [
        {"InstanceType": "m5.large", "AvailabilityZone": "a", "SpotPrice": "0.03",
         "Timestamp": "2026-01-01T00:00:00+00:00"},
        {"InstanceType": "m5.large", "AvailabilityZone": "a", "SpotPrice": "0.04",
         "Timestamp": "2026-01-02T00:00:00+00:00"},
        {"InstanceType": "m5.large", "AvailabilityZone": "b", "SpotPrice": "0.02",
         "Timestamp": "2026-01-01T00:00:00+00:00"},
    ]  # fmt: skip
    assert latest_spot_prices(rows) == {("m5.large", "a"): 0.04, ("m5.large", "b"): 0.02}


@pytest.mark.parametrize(
    ("region", "endpoint"),
    [
        pytest.param("us-west-2", "us-east-1", id="us"),
        pytest.param("eu-west-1", "eu-central-1", id="eu"),
        pytest.param("ap-southeast-2", "ap-south-1", id="ap"),
        pytest.param("cn-north-1", "cn-northwest-1", id="cn"),
    ],
)
def test_pricing_endpoint_region(region: str, endpoint: str) -> None:
    assert pricing_endpoint_region(region) == endpoint


shapes = st.builds(
    InstanceShape,
    name=st.sampled_from(["m5.large", "c7g.xlarge", "t3.micro", "r6i.2xlarge", "g5.xlarge"]),
    vcpus=st.integers(1, 192),
    memory_mib=st.integers(512, 2_000_000),
    arch=st.sampled_from(["amd64", "arm64"]),
    gpus=st.integers(0, 8),
    accelerators=st.integers(0, 16),
)


@given(shape=shapes, extra_cpu=st.integers(1, 64), extra_mib=st.integers(0, 65536))
def test_estimate_grows_with_size(shape: InstanceShape, extra_cpu: int, extra_mib: int) -> None:
    bigger = InstanceShape(
        name=shape.name,
        vcpus=shape.vcpus + extra_cpu,
        memory_mib=shape.memory_mib + extra_mib,
        arch=shape.arch,
        gpus=shape.gpus,
        accelerators=shape.accelerators,
    )
    assert estimate_on_demand(bigger) > estimate_on_demand(shape) > 0


def test_estimate_prefers_graviton_and_newer_generations() -> None:
    def price(name: str, arch: str = "amd64") -> float:
        return estimate_on_demand(InstanceShape(name=name, vcpus=4, memory_mib=16384, arch=arch))

    assert price("m7g.xlarge", "arm64") < price("m7i.xlarge")
    assert price("m7i.xlarge") < price("m5.xlarge") < price("m4.xlarge")
    assert price("t3.xlarge") < price("m5.xlarge")


async def test_moto_has_no_pricing_so_prices_are_estimated_and_announced_once(
    session: AWSSession, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    cache = PriceCache(
        ec2=await session.client("ec2"),
        pricing=await session.client("pricing", region="us-east-1"),
        clock=clock,
        region=REGION,
    )
    with caplog.at_level(logging.WARNING, logger="karpy_aws.providers.pricing"):
        await cache.refresh(SHAPES)
        clock.step(datetime.timedelta(hours=13))
        await cache.refresh(SHAPES)
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("on-demand pricing unavailable, using estimated prices") == 1
    assert messages.count("spot price feed is constant, using estimated spot prices") == 1
    assert cache.estimating_on_demand
    large, xlarge = cache.on_demand("m5.large"), cache.on_demand("m5.xlarge")
    assert large is not None
    assert xlarge is not None
    assert large.source is PriceSource.ESTIMATED
    assert large.usd_per_hour < xlarge.usd_per_hour
    spot = cache.spot("m5.large", "us-west-2a")
    assert spot is not None
    assert spot.source is PriceSource.ESTIMATED
    assert spot.usd_per_hour == pytest.approx(large.usd_per_hour * SPOT_FALLBACK_RATIO)
    assert cache.on_demand("x9.unknown") is None


async def test_pricing_api_prices_are_used_and_refreshed_on_the_period(
    session: AWSSession, faults: FaultInjector
) -> None:
    faults.answer(
        "GetProducts",
        {"PriceList": [_product("m5.large", "0.096"), _product("m5.xlarge", "0.192")]},
    )
    clock = FakeClock()
    cache = PriceCache(
        ec2=await session.client("ec2"),
        pricing=await session.client("pricing", region="us-east-1"),
        clock=clock,
        region=REGION,
    )
    await cache.refresh(SHAPES[:2])
    price = cache.on_demand("m5.large")
    assert price is not None
    assert (price.usd_per_hour, price.source) == (0.096, PriceSource.API)
    assert not cache.estimating_on_demand
    # Fewer than CONSTANT_FEED_MIN_TYPES types: moto's spot rows are taken as they are.
    spot = cache.spot("m5.large", "us-west-2a")
    assert spot is not None
    assert spot.source is PriceSource.API
    clock.step(datetime.timedelta(hours=1))
    await cache.refresh(SHAPES[:2])
    assert faults.sent.count("GetProducts") == 1
    clock.step(datetime.timedelta(hours=12))
    await cache.refresh(SHAPES[:2])
    assert faults.sent.count("GetProducts") == 2


async def test_isolated_region_never_calls_the_pricing_api(
    session: AWSSession, faults: FaultInjector, caplog: pytest.LogCaptureFixture
) -> None:
    cache = PriceCache(
        ec2=await session.client("ec2"), pricing=None, clock=FakeClock(), region=REGION
    )
    with caplog.at_level(logging.WARNING, logger="karpy_aws.providers.pricing"):
        await cache.refresh(SHAPES[:1])
    assert "GetProducts" not in faults.sent
    assert "on-demand pricing disabled, using estimated prices" in caplog.messages


def test_constant_feed_detection_needs_many_types() -> None:
    few = {(f"t{i}.large", "a"): 0.00001 for i in range(3)}
    many = {(f"t{i}.large", "a"): 0.00001 for i in range(12)}
    varied = {**many, ("t0.large", "b"): 0.02}
    assert (is_constant_feed(few), is_constant_feed(many), is_constant_feed(varied)) == (
        False,
        True,
        False,
    )
