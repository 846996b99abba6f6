"""The instance-type catalog: DescribeInstanceTypes + offerings per zone, priced and cached.

Scheduling needs every launchable instance type with its offerings (zone x capacity type, price,
availability). The raw EC2 data changes rarely (refreshed every 12 h); what changes often is
availability (the unavailable-offerings cache) and prices, so the final values are rebuilt from
cached raw data whenever those move. Time comes from an injected clock; refreshes are driven by
the caller, never by sleeping here.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import Clock
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.instancetype.instancetypes import (
    DEFAULT_EPHEMERAL_STORAGE_GIB,
    DEFAULT_RESERVED_ENIS,
    VM_MEMORY_OVERHEAD_PERCENT,
    InstanceTypeInfo,
    KubeletSettings,
    Overhead,
    Resources,
    allocatable,
    capacity,
    instance_labels,
    max_pods,
    overhead,
    parse_instance_type,
)
from karpy_aws.providers.instancetype.learned import LearnedMemory
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.pricing import InstanceShape, PriceCache, Prices
from karpy_aws.session import AWSClient

CATALOG_REFRESH_PERIOD: Final = datetime.timedelta(hours=12)
CATALOG_READ_TIMEOUT: Final = 300.0
"""Seconds to wait for one answer of the catalog's reads (give the catalog a client with this
read timeout). DescribeInstanceTypes answers with every type at once where the endpoint does
not page it (moto: 1,377 types, 5.8 MB, some 3 s of a quiet core to build); a retry after a
shorter timeout asks for the whole answer again, so on a busy endpoint it never arrives."""
SUPPORTED_ARCHITECTURES: Final = ("x86_64", "arm64")


@attrs.frozen(kw_only=True)
class Zone:
    """An availability zone and its id (``topology.k8s.aws/zone-id``)."""

    name: str
    zone_id: str


@attrs.frozen(kw_only=True)
class Offering:
    """One way to buy an instance type."""

    zone: str
    zone_id: str
    capacity_type: str
    price: float
    available: bool
    reservation_id: str | None = None
    """The capacity reservation a ``reserved`` offering launches into."""
    reservation_type: str | None = None
    """``default`` or ``capacity-block``, for a ``reserved`` offering."""


@attrs.frozen(kw_only=True)
class AWSInstanceType:
    """An instance type as karpy schedules it (one per architecture it supports)."""

    name: str
    labels: Mapping[str, str]
    capacity: Resources
    overhead: Overhead
    allocatable: Resources
    offerings: tuple[Offering, ...]
    info: InstanceTypeInfo


async def describe_instance_types(
    ec2: AWSClient, *, names: Sequence[str] = ()
) -> tuple[InstanceTypeInfo, ...]:
    """x86_64 and arm64 instance types (all, or only ``names``), sorted by name."""
    params: dict[str, Any] = {
        "Filters": [
            {"Name": "processor-info.supported-architecture", "Values": [*SUPPORTED_ARCHITECTURES]}
        ]
    }
    if names:
        params["InstanceTypes"] = list(names)
    raw = await ec2.paginate("DescribeInstanceTypes", result_key="InstanceTypes", **params)
    return tuple(sorted((parse_instance_type(r) for r in raw), key=lambda i: i.name))


async def describe_zones(ec2: AWSClient) -> tuple[Zone, ...]:
    """The region's available zones."""
    response = await ec2.call(
        "DescribeAvailabilityZones", Filters=[{"Name": "state", "Values": ["available"]}]
    )
    return tuple(
        sorted(
            (Zone(name=z["ZoneName"], zone_id=z.get("ZoneId", ""))
             for z in response["AvailabilityZones"]),
            key=lambda z: z.name,
        )
    )  # fmt: skip


async def describe_offerings(
    ec2: AWSClient, *, names: Sequence[str] = ()
) -> Mapping[str, frozenset[str]]:
    """Instance type -> zones it is offered in."""
    params: dict[str, Any] = {"LocationType": "availability-zone"}
    if names:
        params["Filters"] = [{"Name": "instance-type", "Values": list(names)}]
    rows = await ec2.paginate(
        "DescribeInstanceTypeOfferings", result_key="InstanceTypeOfferings", **params
    )
    zones: dict[str, set[str]] = {}
    for row in rows:
        zones.setdefault(row["InstanceType"], set()).add(row["Location"])
    return MappingProxyType({k: frozenset(v) for k, v in sorted(zones.items())})


def build_instance_types(
    info: InstanceTypeInfo,
    *,
    zones: Sequence[Zone],
    offered_in: frozenset[str],
    family: AMIFamily,
    kubelet: KubeletSettings,
    prices: Prices,
    unavailable: UnavailableOfferings,
    ephemeral_storage_gib: int = DEFAULT_EPHEMERAL_STORAGE_GIB,
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = DEFAULT_RESERVED_ENIS,
    instance_store_raid0: bool = False,
    efa_interfaces: int | None = None,
    learned_memory: int | None = None,
) -> tuple[AWSInstanceType, ...]:
    """One AWSInstanceType per architecture of ``info``, with every offering (available or
    not: the scheduler must see unavailable ones too, as Karpenter's GetInstanceTypes does)."""
    pods = max_pods(info, family=family, kubelet=kubelet, reserved_enis=reserved_enis)
    cap = capacity(
        info,
        pods=pods,
        ephemeral_storage_gib=ephemeral_storage_gib,
        vm_memory_overhead_percent=vm_memory_overhead_percent,
        instance_store_raid0=instance_store_raid0,
        efa_interfaces=efa_interfaces,
        learned_memory=learned_memory,
    )
    over = overhead(cap, kubelet=kubelet)
    offerings = []
    for zone in zones:
        for capacity_type in info.usage_classes:
            price = (
                prices.spot(info.name, zone.name)
                if capacity_type == wk.CAPACITY_TYPE_SPOT
                else prices.on_demand(info.name)
            )
            offerings.append(
                Offering(
                    zone=zone.name,
                    zone_id=zone.zone_id,
                    capacity_type=capacity_type,
                    price=price.usd_per_hour if price else 0.0,
                    available=zone.name in offered_in
                    and price is not None
                    and not unavailable.is_unavailable(
                        capacity_type=capacity_type, instance_type=info.name, zone=zone.name
                    ),
                )
            )
    offers = tuple(sorted(offerings, key=lambda o: (o.price, o.zone, o.capacity_type)))
    return tuple(
        AWSInstanceType(
            name=info.name,
            labels=instance_labels(info, arch=arch),
            capacity=cap,
            overhead=over,
            allocatable=allocatable(cap, over),
            offerings=offers,
            info=info,
        )
        for arch in info.architectures
    )


def shape_of(info: InstanceTypeInfo) -> InstanceShape:
    """What pricing needs to estimate ``info``'s price."""
    return InstanceShape(
        name=info.name,
        vcpus=info.vcpus,
        memory_mib=info.memory_mib,
        arch=info.architectures[0] if info.architectures else "",
        gpus=info.gpu_count,
        accelerators=info.accelerator_count,
    )


class InstanceTypeCatalog:
    """Raw EC2 instance-type data, refreshed every 12 h, turned into priced instance types.

    ``names`` narrows the catalog (tests, or operators who allow only a few types); empty means
    every type EC2 describes.
    """

    def __init__(
        self,
        *,
        ec2: AWSClient,
        prices: PriceCache,
        unavailable: UnavailableOfferings,
        clock: Clock,
        names: Sequence[str] = (),
        refresh_period: datetime.timedelta = CATALOG_REFRESH_PERIOD,
        vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT,
        reserved_enis: int = DEFAULT_RESERVED_ENIS,
        learned: LearnedMemory | None = None,
    ) -> None:
        self._ec2 = ec2
        self.learned = learned if learned is not None else LearnedMemory()
        """Memory registered nodes reported, per type and AMI family (used over the guess)."""
        self._prices = prices
        self._unavailable = unavailable
        self._clock = clock
        self._names = tuple(names)
        self._period = refresh_period
        self._vm_memory_overhead_percent = vm_memory_overhead_percent
        self._reserved_enis = reserved_enis
        self._infos: tuple[InstanceTypeInfo, ...] = ()
        self._zones: tuple[Zone, ...] = ()
        self._offered: Mapping[str, frozenset[str]] = MappingProxyType({})
        self._refreshed_at: datetime.datetime | None = None
        self._built: dict[tuple[object, ...], tuple[AWSInstanceType, ...]] = {}
        self.generation = 0
        """Bumped whenever built instance types may change (a refresh); caches key on it."""

    @property
    def loaded(self) -> bool:
        """True once EC2 has been read at least once."""
        return self._refreshed_at is not None

    def info(self, name: str) -> InstanceTypeInfo | None:
        """The described instance type called ``name``, if the catalog has it."""
        return next((i for i in self._infos if i.name == name), None)

    async def refresh(self, *, force: bool = False) -> bool:
        """Re-read EC2 (and prices) if the period has passed; return True if it did."""
        now = self._clock.now()
        if not force and self._refreshed_at and now - self._refreshed_at < self._period:
            if await self._prices.refresh(shape_of(i) for i in self._infos):
                self._built.clear()  # prices may have moved
                self.generation += 1
            return False
        infos = await describe_instance_types(self._ec2, names=self._names)
        zones = await describe_zones(self._ec2)
        offered = await describe_offerings(self._ec2, names=[i.name for i in infos])
        await self._prices.refresh((shape_of(i) for i in infos), force=force)
        self._infos, self._zones, self._offered = infos, zones, offered
        self._refreshed_at = now
        self._built.clear()
        self.generation += 1
        return True

    def instance_types(
        self,
        *,
        family: AMIFamily,
        kubelet: KubeletSettings,
        ephemeral_storage_gib: int = DEFAULT_EPHEMERAL_STORAGE_GIB,
        instance_store_raid0: bool = False,
        efa_interfaces: int | None = None,
    ) -> tuple[AWSInstanceType, ...]:
        """Every instance type for one NodeClass shape; rebuilt when availability changed."""
        key = (
            family,
            kubelet,
            ephemeral_storage_gib,
            instance_store_raid0,
            efa_interfaces,
            self._unavailable.seq_num,
            self.learned.seq_num,
        )
        if key not in self._built:
            if len(self._built) > 64:
                self._built.clear()
            self._built[key] = tuple(
                it
                for info in self._infos
                for it in build_instance_types(
                    info,
                    zones=self._zones,
                    offered_in=self._offered.get(info.name, frozenset()),
                    family=family,
                    kubelet=kubelet,
                    prices=self._prices,
                    unavailable=self._unavailable,
                    ephemeral_storage_gib=ephemeral_storage_gib,
                    vm_memory_overhead_percent=self._vm_memory_overhead_percent,
                    reserved_enis=self._reserved_enis,
                    instance_store_raid0=instance_store_raid0,
                    efa_interfaces=efa_interfaces,
                    learned_memory=self.learned.memory(info.name, family),
                )
            )
        return self._built[key]
