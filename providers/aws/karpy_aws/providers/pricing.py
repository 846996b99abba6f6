"""On-demand and spot prices per instance type (and zone), with an honest fallback.

The scheduler launches the cheapest offering that fits, so every offering needs a price. AWS
publishes on-demand prices through the Pricing API and spot prices through
DescribeSpotPriceHistory. Some places have neither: isolated regions and test environments
(moto has no Pricing API and one constant spot price). There karpy *estimates* prices from vCPU,
memory, accelerators, architecture and generation — not real prices, but ordered like real ones
(bigger costs more, Graviton and newer generations cost less, spot less than on-demand) — and says
so once in the log. Refreshes are driven by the caller on an injected clock; nothing sleeps here.
"""

from __future__ import annotations

import datetime
import enum
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Protocol

import attrs
import orjson

from karpy.runtime.clock import Clock
from karpy_aws.errors import AWSError
from karpy_aws.session import AWSClient

REFRESH_PERIOD: Final = datetime.timedelta(hours=12)
# Estimated prices, in USD per hour, calibrated on x86 general-purpose families.
EST_PER_VCPU: Final = 0.033
EST_PER_GIB: Final = 0.0045
EST_PER_GPU: Final = 0.30
EST_PER_ACCELERATOR: Final = 0.20
EST_BURSTABLE_FACTOR: Final = 0.8
EST_ARM64_FACTOR: Final = 0.8
EST_GENERATION_STEP: Final = 0.03  # each generation older than EST_NEWEST_GENERATION costs 3% more
EST_NEWEST_GENERATION: Final = 8
# Spot price used when no real spot price is known: a typical spot discount.
SPOT_FALLBACK_RATIO: Final = 0.4
# A spot feed with at least this many types all at one price is a placeholder, not a market.
CONSTANT_FEED_MIN_TYPES: Final = 10

LINUX_PRODUCT_DESCRIPTIONS: Final = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
_NAME = re.compile(r"^(?P<category>[a-z]+?)(?P<generation>\d+)(?P<attrs>[a-z-]*)\.(?P<size>.+)$")

log = logging.getLogger(__name__)


class PriceSource(enum.StrEnum):
    """Where a price came from."""

    API = "api"
    ESTIMATED = "estimated"


@attrs.frozen
class Price:
    """USD per hour and its provenance."""

    usd_per_hour: float
    source: PriceSource


@attrs.frozen(kw_only=True)
class InstanceShape:
    """What the estimate needs to know about an instance type."""

    name: str
    vcpus: int
    memory_mib: int
    arch: str  # kubernetes.io/arch value
    gpus: int = 0
    accelerators: int = 0


def pricing_endpoint_region(region: str) -> str:
    """The Pricing API region that serves ``region`` (it runs in only four places)."""
    if region.startswith("cn-"):
        return "cn-northwest-1"
    if region.startswith("ap-"):
        return "ap-south-1"
    if region.startswith(("eu-", "me-", "af-", "il-")):
        return "eu-central-1"
    return "us-east-1"


def on_demand_filters(region: str) -> list[dict[str, str]]:
    """GetProducts filters for shared-tenancy Linux on-demand prices in ``region``."""
    terms = {
        "regionCode": region,
        "serviceCode": "AmazonEC2",
        "preInstalledSw": "NA",
        "operatingSystem": "Linux",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
        "tenancy": "Shared",
        "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def parse_price_list(items: Iterable[str]) -> dict[str, float]:
    """Parse GetProducts' ``PriceList`` (JSON strings) into instance type -> USD/hour (pure).

    Products without an instance type or a positive USD price are skipped.
    """
    prices: dict[str, float] = {}
    for item in items:
        product = orjson.loads(item)
        name = product.get("product", {}).get("attributes", {}).get("instanceType")
        if not name:
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", 0) or 0)
                if usd > 0:
                    prices[name] = usd
    return prices


class Prices(Protocol):
    """Where instance types get their prices: the refreshed cache, or estimates alone."""

    def on_demand(self, instance_type: str) -> Price | None: ...

    def spot(self, instance_type: str, zone: str) -> Price | None: ...


@attrs.frozen
class EstimatedPrices:
    """Estimated prices only (module docstring): for offline catalogs, and the cache's fallback
    where the APIs gave nothing."""

    shapes: Mapping[str, InstanceShape]

    def on_demand(self, instance_type: str) -> Price | None:
        shape = self.shapes.get(instance_type)
        if shape is None:
            return None
        return Price(estimate_on_demand(shape), PriceSource.ESTIMATED)

    def spot(self, instance_type: str, zone: str) -> Price | None:
        return spot_fallback(self.on_demand(instance_type))


def spot_fallback(on_demand: Price | None) -> Price | None:
    """A spot price where none is known: the on-demand price times SPOT_FALLBACK_RATIO."""
    if on_demand is None:
        return None
    return Price(round(on_demand.usd_per_hour * SPOT_FALLBACK_RATIO, 6), PriceSource.ESTIMATED)


def estimate_on_demand(shape: InstanceShape) -> float:
    """The fallback on-demand price (pure): see the module docstring for what it promises."""
    price = shape.vcpus * EST_PER_VCPU + (shape.memory_mib / 1024) * EST_PER_GIB
    price += shape.gpus * EST_PER_GPU + shape.accelerators * EST_PER_ACCELERATOR
    match = _NAME.match(shape.name)
    if match:
        if match["category"] == "t":
            price *= EST_BURSTABLE_FACTOR
        older = max(0, EST_NEWEST_GENERATION - int(match["generation"]))
        price *= 1 + EST_GENERATION_STEP * older
    if shape.arch == "arm64":
        price *= EST_ARM64_FACTOR
    return round(price, 6)


async def fetch_on_demand(pricing: AWSClient, *, region: str) -> dict[str, float]:
    """All on-demand Linux prices for ``region`` from the Pricing API."""
    items = await pricing.paginate(
        "GetProducts",
        result_key="PriceList",
        ServiceCode="AmazonEC2",
        FormatVersion="aws_v1",
        Filters=on_demand_filters(region),
    )
    return parse_price_list(items)


async def fetch_spot(
    ec2: AWSClient, *, now: datetime.datetime, instance_types: Sequence[str] = ()
) -> dict[tuple[str, str], float]:
    """The latest Linux spot price per (instance type, zone)."""
    params: dict[str, Any] = {
        "ProductDescriptions": list(LINUX_PRODUCT_DESCRIPTIONS),
        "StartTime": now,
    }
    if instance_types:
        params["InstanceTypes"] = list(instance_types)
    rows = await ec2.paginate("DescribeSpotPriceHistory", result_key="SpotPriceHistory", **params)
    return latest_spot_prices(rows)


def latest_spot_prices(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """Reduce spot price history rows to the newest price per (type, zone) (pure)."""
    newest: dict[tuple[str, str], tuple[str, float]] = {}
    for row in rows:
        key = (str(row["InstanceType"]), str(row["AvailabilityZone"]))
        stamp = str(row.get("Timestamp", ""))
        price = float(row["SpotPrice"])
        if price <= 0:
            continue
        if key not in newest or stamp >= newest[key][0]:
            newest[key] = (stamp, price)
    return {k: v[1] for k, v in newest.items()}


def is_constant_feed(prices: Mapping[tuple[str, str], float]) -> bool:
    """True for a spot feed that quotes one price for many types: a stand-in, not a market."""
    types = {t for t, _ in prices}
    return len(types) >= CONSTANT_FEED_MIN_TYPES and len(set(prices.values())) == 1


class PriceCache:
    """Prices for the scheduler; refreshed by :meth:`refresh` when the period has passed.

    ``pricing=None`` (isolated regions) skips the Pricing API and estimates on-demand prices.
    """

    def __init__(
        self,
        *,
        ec2: AWSClient,
        pricing: AWSClient | None,
        clock: Clock,
        region: str,
        refresh_period: datetime.timedelta = REFRESH_PERIOD,
    ) -> None:
        self._ec2 = ec2
        self._pricing = pricing
        self._clock = clock
        self._region = region
        self._period = refresh_period
        self._shapes: Mapping[str, InstanceShape] = MappingProxyType({})
        self._on_demand: Mapping[str, float] = MappingProxyType({})
        self._spot: Mapping[tuple[str, str], float] = MappingProxyType({})
        self._on_demand_at: datetime.datetime | None = None
        self._spot_at: datetime.datetime | None = None
        self._announced: set[str] = set()

    @property
    def estimating_on_demand(self) -> bool:
        """True when on-demand prices are estimates (no Pricing API data)."""
        return not self._on_demand

    def _announce(self, what: str, **fields: Any) -> None:
        if what in self._announced:
            return
        self._announced.add(what)
        log.warning(what, extra=fields)

    def _due(self, last: datetime.datetime | None, now: datetime.datetime) -> bool:
        return last is None or now - last >= self._period

    async def refresh(self, shapes: Iterable[InstanceShape], *, force: bool = False) -> bool:
        """Fetch prices that are older than the refresh period (or all, with ``force``); return
        True if any were due (prices may have moved), False if nothing was asked.

        A failed fetch keeps the previous data (or the estimate) and is logged once; it never
        raises AWSError, because stale or estimated prices are better than none.
        """
        self._shapes = MappingProxyType({s.name: s for s in shapes})
        now = self._clock.now()
        on_demand_due = force or self._due(self._on_demand_at, now)
        spot_due = force or self._due(self._spot_at, now)
        if on_demand_due:
            self._on_demand_at = now
            if self._pricing is None:
                self._announce("on-demand pricing disabled, using estimated prices")
            else:
                try:
                    prices = await fetch_on_demand(self._pricing, region=self._region)
                except AWSError as e:
                    self._announce(
                        "on-demand pricing unavailable, using estimated prices",
                        code=e.code,
                        error=str(e),
                    )
                else:
                    if prices:
                        self._on_demand = MappingProxyType(prices)
                    else:
                        self._announce("on-demand pricing returned no prices, using estimates")
        if spot_due:
            self._spot_at = now
            try:
                spot = await fetch_spot(self._ec2, now=now, instance_types=sorted(self._shapes))
            except AWSError as e:
                self._announce("spot pricing unavailable, using estimated prices", code=e.code)
            else:
                if is_constant_feed(spot):
                    self._announce(
                        "spot price feed is constant, using estimated spot prices",
                        price=next(iter(spot.values())),
                    )
                    self._spot = MappingProxyType({})
                else:
                    self._spot = MappingProxyType(spot)
        return on_demand_due or spot_due

    def on_demand(self, instance_type: str) -> Price | None:
        """The on-demand price, from the API or estimated; None for an unknown type."""
        if instance_type in self._on_demand:
            return Price(self._on_demand[instance_type], PriceSource.API)
        return EstimatedPrices(self._shapes).on_demand(instance_type)

    def spot(self, instance_type: str, zone: str) -> Price | None:
        """The latest spot price in ``zone``, else the on-demand price times SPOT_FALLBACK_RATIO."""
        value = self._spot.get((instance_type, zone))
        if value is not None:
            return Price(value, PriceSource.API)
        return spot_fallback(self.on_demand(instance_type))
