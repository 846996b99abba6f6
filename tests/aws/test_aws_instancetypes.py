"""Instance types: Karpenter's labels, capacity, overhead and offerings from moto's EC2 data."""

from __future__ import annotations

import datetime
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import FakeClock
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.instancetype.instancetypes import (
    AWS_NEURON,
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    MIB,
    NVIDIA_GPU,
    PODS,
    InstanceTypeInfo,
    KubeletSettings,
    allocatable,
    capacity,
    default_kube_reserved,
    eni_limited_pods,
    max_pods,
    overhead,
)
from karpy_aws.providers.instancetype.offerings import InstanceTypeCatalog, describe_instance_types
from karpy_aws.providers.instancetype.trunking import POD_ENI, branch_interfaces, parse_limits
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.pricing import PriceCache
from karpy_aws.session import AWSSession

from .conftest import REGION, FaultInjector

pytestmark = pytest.mark.aws

NAMES = ["m5.large", "c6g.xlarge", "g4dn.xlarge", "inf1.xlarge", "m5.metal", "t3.micro"]


async def _catalog(
    session: AWSSession, clock: FakeClock
) -> tuple[InstanceTypeCatalog, UnavailableOfferings]:
    ec2 = await session.client("ec2")
    unavailable = UnavailableOfferings(clock)
    prices = PriceCache(ec2=ec2, pricing=None, clock=clock, region=REGION)
    catalog = InstanceTypeCatalog(
        ec2=ec2, prices=prices, unavailable=unavailable, clock=clock, names=NAMES
    )
    await catalog.refresh()
    return catalog, unavailable


async def test_labels_follow_karpenter_for_gpu_and_accelerator_types(session: AWSSession) -> None:
    catalog, _ = await _catalog(session, FakeClock())
    types = {
        t.name: t
        for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
    }
    assert sorted(types) == sorted(NAMES)
    g4 = types["g4dn.xlarge"].labels
    assert g4[awslabels.LABEL_AWS_INSTANCE_CATEGORY] == "g"
    assert g4[awslabels.LABEL_AWS_INSTANCE_FAMILY] == "g4dn"
    assert g4[awslabels.LABEL_AWS_INSTANCE_GENERATION] == "4"
    assert g4[awslabels.LABEL_AWS_INSTANCE_SIZE] == "xlarge"
    assert g4[awslabels.LABEL_AWS_INSTANCE_CPU] == "4"
    assert g4[awslabels.LABEL_AWS_INSTANCE_MEMORY] == "16384"
    assert g4[awslabels.LABEL_AWS_INSTANCE_HYPERVISOR] == "nitro"
    assert g4[awslabels.LABEL_AWS_INSTANCE_GPU_NAME] == "t4"
    assert g4[awslabels.LABEL_AWS_INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert g4[awslabels.LABEL_AWS_INSTANCE_GPU_COUNT] == "1"
    assert g4[awslabels.LABEL_AWS_INSTANCE_GPU_MEMORY] == "16384"
    assert g4[awslabels.LABEL_AWS_INSTANCE_LOCAL_NVME] == "125"
    assert g4[wk.LABEL_ARCH] == wk.ARCH_AMD64
    assert g4[wk.LABEL_OS] == wk.OS_LINUX
    assert g4[wk.LABEL_INSTANCE_TYPE] == "g4dn.xlarge"
    assert types["g4dn.xlarge"].capacity[NVIDIA_GPU] == 1
    inf = types["inf1.xlarge"]
    assert inf.labels[awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_NAME] == "inferentia"
    assert inf.labels[awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_MANUFACTURER] == "aws"
    assert inf.capacity[AWS_NEURON] == 1
    assert types["c6g.xlarge"].labels[wk.LABEL_ARCH] == wk.ARCH_ARM64
    assert types["c6g.xlarge"].labels[awslabels.LABEL_AWS_INSTANCE_CPU_MANUFACTURER] == "aws"
    assert types["m5.metal"].labels[awslabels.LABEL_AWS_INSTANCE_HYPERVISOR] == ""
    assert set(g4) <= awslabels.AWS_WELL_KNOWN_LABELS | wk.WELL_KNOWN_LABELS


async def test_m5_large_capacity_overhead_and_allocatable(session: AWSSession) -> None:
    catalog, _ = await _catalog(session, FakeClock())
    (m5,) = [
        t
        for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
        if t.name == "m5.large"
    ]
    # 8192 MiB - ceil(8192 * 7.5%) = 8192 - 615; 3 ENIs * (10 - 1) + 2 = 29 pods.
    assert m5.capacity[MEMORY] == (8192 - 615) * MIB
    assert m5.capacity[CPU] == 2000
    assert m5.capacity[PODS] == 29
    # 60m for the first core + 10m for the second; 11Mi * 29 + 255Mi.
    assert m5.overhead.kube_reserved[CPU] == 70
    assert m5.overhead.kube_reserved[MEMORY] == (11 * 29 + 255) * MIB
    assert m5.overhead.eviction_threshold[MEMORY] == 100 * MIB
    assert m5.allocatable[CPU] == 1930
    assert m5.allocatable[MEMORY] == (8192 - 615 - 574 - 100) * MIB


async def test_offerings_cover_zones_and_capacity_types_and_honour_ice(
    session: AWSSession,
) -> None:
    clock = FakeClock()
    catalog, unavailable = await _catalog(session, clock)
    kubelet = KubeletSettings()

    def offering(zone: str, capacity_type: str) -> bool:
        (m5,) = [
            t
            for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=kubelet)
            if t.name == "m5.large"
        ]
        (match,) = [o for o in m5.offerings if o.zone == zone and o.capacity_type == capacity_type]
        assert match.zone_id.startswith("usw2-az")
        assert match.price > 0
        return match.available

    assert offering("us-west-2a", "spot")
    unavailable.mark_unavailable(
        reason="InsufficientInstanceCapacity",
        capacity_type="spot",
        instance_type="m5.large",
        zone="us-west-2a",
    )
    assert not offering("us-west-2a", "spot")
    assert offering("us-west-2a", "on-demand")
    assert offering("us-west-2b", "spot")
    clock.step(datetime.timedelta(minutes=3))
    unavailable.cleanup()
    assert offering("us-west-2a", "spot")


async def test_types_not_offered_in_a_zone_are_listed_but_unavailable(
    session: AWSSession,
) -> None:
    catalog, _ = await _catalog(session, FakeClock())
    (g4,) = [
        t
        for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
        if t.name == "g4dn.xlarge"
    ]
    d = [o for o in g4.offerings if o.zone == "us-west-2d"]
    assert d  # listed, because the scheduler must see every offering
    assert not any(o.available for o in d)  # moto does not offer g4dn.xlarge in 2d


async def test_catalog_refreshes_on_its_period_only(
    session: AWSSession, faults: FaultInjector
) -> None:
    clock = FakeClock()
    catalog, _ = await _catalog(session, clock)
    assert faults.sent.count("DescribeInstanceTypes") == 1
    clock.step(datetime.timedelta(hours=1))
    assert not await catalog.refresh()
    assert faults.sent.count("DescribeInstanceTypes") == 1
    clock.step(datetime.timedelta(hours=12))
    assert await catalog.refresh()
    assert faults.sent.count("DescribeInstanceTypes") == 2


async def test_cheaper_offerings_come_first(session: AWSSession) -> None:
    catalog, _ = await _catalog(session, FakeClock())
    for it in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings()):
        prices = [o.price for o in it.offerings]
        assert prices == sorted(prices)


async def test_unknown_instance_type_name_is_an_invalid_request(session: AWSSession) -> None:
    from karpy_aws import errors

    with pytest.raises(errors.InvalidRequestError, match="InvalidInstanceType"):
        await describe_instance_types(await session.client("ec2"), names=["m5.bogus"])


def _info(vcpus: int = 2, memory_mib: int = 8192, enis: int = 3, ips: int = 10) -> InstanceTypeInfo:
    return InstanceTypeInfo(
        name="m5.large",
        vcpus=vcpus,
        memory_mib=memory_mib,
        architectures=(wk.ARCH_AMD64,),
        hypervisor="nitro",
        bare_metal=False,
        max_network_interfaces=enis,
        ipv4_per_interface=ips,
        usage_classes=(wk.CAPACITY_TYPE_ON_DEMAND,),
    )


@pytest.mark.parametrize(
    ("family", "kubelet", "expected"),
    [
        pytest.param(AMIFamily.AL2023, KubeletSettings(), 29, id="eni-limited"),
        pytest.param(AMIFamily.AL2, KubeletSettings(), 29, id="eni-limited-al2"),
        pytest.param(AMIFamily.BOTTLEROCKET, KubeletSettings(), 110, id="default-110"),
        pytest.param(AMIFamily.AL2023, KubeletSettings(max_pods=50), 50, id="kubelet-maxpods"),
        pytest.param(AMIFamily.AL2023, KubeletSettings(pods_per_core=4), 8, id="pods-per-core"),
    ],
)
def test_max_pods(family: AMIFamily, kubelet: KubeletSettings, expected: int) -> None:
    assert max_pods(_info(), family=family, kubelet=kubelet) == expected


@pytest.mark.parametrize(
    ("cpu_millis", "reserved"),
    [
        pytest.param(1000, 60, id="1-core"),
        pytest.param(2000, 70, id="2-cores"),
        pytest.param(4000, 80, id="4-cores"),
        pytest.param(8000, 90, id="8-cores"),
        pytest.param(96000, 310, id="96-cores"),
    ],
)
def test_kube_reserved_cpu_ladder(cpu_millis: int, reserved: int) -> None:
    assert default_kube_reserved(cpu_millis=cpu_millis, pods=10)[CPU] == reserved


def test_explicit_kubelet_reservations_replace_the_defaults() -> None:
    cap = capacity(_info(), pods=29)
    kubelet = KubeletSettings(
        kube_reserved={"cpu": "200m", "memory": "1Gi"},
        system_reserved={"cpu": "0.1", "pid": "100"},
        eviction_hard={"memory.available": "500Mi", "nodefs.available": "5%"},
        eviction_soft={"memory.available": "600Mi"},
    )
    over = overhead(cap, kubelet=kubelet)
    # kubeReserved replaces the defaults per resource; ephemeral-storage keeps its default.
    assert over.kube_reserved[EPHEMERAL_STORAGE] == 1024 * MIB
    alloc = allocatable(cap, over)
    assert alloc[CPU] == 2000 - 300
    # The larger of evictionHard and evictionSoft wins for each signal.
    assert alloc[MEMORY] == cap[MEMORY] - (1024 + 600) * MIB
    storage = cap[EPHEMERAL_STORAGE]
    assert alloc[EPHEMERAL_STORAGE] == storage - 1024 * MIB - math.ceil(storage * 5 / 100)


@pytest.mark.parametrize(
    ("kubelet", "field"),
    [
        pytest.param(KubeletSettings(kube_reserved={"cpu": "lots"}), "kubeReserved", id="kube"),
        pytest.param(
            KubeletSettings(eviction_hard={"nodefs.available": "ten%"}), "evictionHard", id="pct"
        ),
        pytest.param(
            KubeletSettings(eviction_soft={"memory.available": "1Zi"}), "evictionSoft", id="soft"
        ),
    ],
)
def test_bad_kubelet_quantities_name_the_field(kubelet: KubeletSettings, field: str) -> None:
    from karpy_aws import errors

    cap = capacity(_info(), pods=29)
    with pytest.raises(errors.ConfigurationError, match=f"kubelet.{field}"):
        overhead(cap, kubelet=kubelet)


@given(
    vcpus=st.integers(1, 448),
    memory_mib=st.integers(512, 24 * 1024 * 1024),
    enis=st.integers(1, 15),
    ips=st.integers(1, 50),
)
def test_allocatable_is_never_negative_nor_above_capacity(
    vcpus: int, memory_mib: int, enis: int, ips: int
) -> None:
    info = _info(vcpus, memory_mib, enis, ips)
    pods = eni_limited_pods(info)
    assert pods >= 2
    cap = capacity(info, pods=pods)
    alloc = allocatable(cap, overhead(cap, kubelet=KubeletSettings()))
    assert all(0 <= alloc[k] <= cap[k] for k in cap)
    assert cap[MEMORY] < memory_mib * MIB


async def test_conversion_to_the_core_instance_type(session: AWSSession) -> None:
    from karpy.core.requirements import Requirements
    from karpy.core.resources import Resources
    from karpy_aws.providers.instancetype.coretypes import to_core_instance_type

    catalog, unavailable = await _catalog(session, FakeClock())
    unavailable.mark_unavailable(
        reason="test", capacity_type="spot", instance_type="m5.large", zone="us-west-2a"
    )
    (m5,) = [
        t
        for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
        if t.name == "m5.large"
    ]
    core = to_core_instance_type(m5)
    assert core.name == "m5.large"
    assert core.capacity["cpu"] == 2000
    assert core.capacity["memory"] == (8192 - 615) * MIB * 1000
    assert core.allocatable["cpu"] == 1930
    assert Resources.of({"cpu": "1930m", "memory": "6Gi"}).fits(core.allocatable)
    assert not Resources.of({"cpu": "1931m"}).fits(core.allocatable)
    assert len(core.offerings) == len(m5.offerings)
    family = core.requirements.get(awslabels.LABEL_AWS_INSTANCE_FAMILY)
    assert family is not None
    assert family.has("m5")
    zone_ids = core.requirements.get(awslabels.LABEL_AWS_ZONE_ID)
    assert zone_ids is not None
    assert zone_ids.has(m5.offerings[0].zone_id)
    wants_spot_2a = Requirements.from_labels(
        {wk.LABEL_CAPACITY_TYPE: "spot", wk.LABEL_TOPOLOGY_ZONE: "us-west-2a"}
    )
    assert core.cheapest(wants_spot_2a) is None  # held out by the ICE cache
    wants_spot_2b = Requirements.from_labels(
        {wk.LABEL_CAPACITY_TYPE: "spot", wk.LABEL_TOPOLOGY_ZONE: "us-west-2b"}
    )
    offering = core.cheapest(wants_spot_2b)
    assert offering is not None
    assert offering.zone == "us-west-2b"


def test_trunking_types_offer_pod_enis_and_others_none() -> None:
    """vpc.amazonaws.com/pod-eni is a type's branch ENIs (the VPC resource controller's table):
    m5 and c6g trunk, t3 does not."""
    assert branch_interfaces("m5.large") == 9
    assert branch_interfaces("m5.xlarge") == 18
    assert branch_interfaces("c6g.large") == 9
    assert branch_interfaces("t3.micro") == 0
    assert branch_interfaces("no-such.type") == 0


async def test_pod_eni_is_capacity_of_trunking_types(session: AWSSession) -> None:
    catalog, _ = await _catalog(session, FakeClock())
    types = {
        t.name: t
        for t in catalog.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
    }
    assert types["m5.large"].capacity[POD_ENI] == 9
    assert types["m5.large"].allocatable[POD_ENI] == 9
    assert types["m5.metal"].capacity[POD_ENI] == branch_interfaces("m5.metal") > 0
    assert POD_ENI not in types["t3.micro"].capacity


def test_the_trunking_table_is_read_from_the_controllers_go_source() -> None:
    source = (
        "var Limits = map[string]*VPCLimits{\n"
        '\t"m9.large": {\n\t\tInterface:               3,\n'
        "\t\tIsTrunkingCompatible:    true,\n\t\tBranchInterface:         9,\n"
        "\t\tNetworkCards: []NetworkCard{\n\t\t\t{\n\t\t\t},\n\t\t},\n\t},\n"
        '\t"t9.micro": {\n\t\tIsTrunkingCompatible:    false,\n'
        "\t\tBranchInterface:         0,\n\t},\n}\n"
    )
    assert parse_limits(source) == {"m9.large": 9}
    with pytest.raises(ValueError, match=r"'x9\.large' has no IsTrunkingCompatible"):
        parse_limits('\t"x9.large": {\n\t\tInterface:               3,\n\t},\n')
