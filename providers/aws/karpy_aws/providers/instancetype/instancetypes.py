"""What an EC2 instance type offers a Kubernetes node: labels, capacity, overhead, allocatable.

The scheduler packs pods onto instance types by their *allocatable* resources and matches
NodePool requirements against their labels, so these numbers must be the ones the kubelet will
report. This module derives them exactly as Karpenter does, from DescribeInstanceTypes data:
memory minus the VM overhead, the ENI-limited pod count, default kube-reserved and eviction
thresholds. Everything here is pure; fetching and caching live in
:mod:`karpy_aws.providers.instancetype.offerings`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.resources import QuantityError, parse_quantity
from karpy_aws.apis import labels as awslabels
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.amifamily.amis import EC2_ARCH_TO_K8S, AMIFamily
from karpy_aws.providers.instancetype.trunking import POD_ENI, branch_interfaces
from karpy_aws.providers.selectors import Tags, freeze_tags

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
VM_MEMORY_OVERHEAD_PERCENT: Final = 0.075
DEFAULT_MAX_PODS: Final = 110
DEFAULT_RESERVED_ENIS: Final = 0
DEFAULT_EPHEMERAL_STORAGE_GIB: Final = 20
KUBE_RESERVED_EPHEMERAL_STORAGE: Final = 1 * GIB
EVICTION_HARD_MEMORY: Final = 100 * MIB
EVICTION_HARD_NODEFS_PERCENT: Final = 10
# kube-reserved CPU: (start millicores, end millicores, fraction reserved of that slice).
KUBE_RESERVED_CPU_LADDER: Final = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 62, 0.0025),
)
ENI_LIMITED_FAMILIES: Final = frozenset({AMIFamily.AL2, AMIFamily.AL2023})

# Resource names (Kubernetes extended resources included).
CPU: Final = "cpu"  # millicores
MEMORY: Final = "memory"  # bytes
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"  # bytes
NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HABANA_GAUDI: Final = "habana.ai/gaudi"
AWS_NEURON: Final = "aws.amazon.com/neuron"
AWS_NEURON_CORE: Final = "aws.amazon.com/neuroncore"
EFA: Final = "vpc.amazonaws.com/efa"
_GPU_RESOURCES: Final = {"nvidia": NVIDIA_GPU, "amd": AMD_GPU, "habana": HABANA_GAUDI}

_NAME = re.compile(r"^(?P<category>[a-z]+)(?:-\d+tb)?(?P<generation>\d+)[^.]*\.(?P<size>.+)$")

Resources = Mapping[str, int]


def _freeze(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(value.items())))


@attrs.frozen(kw_only=True)
class InstanceTypeInfo:
    """The facts from DescribeInstanceTypes that karpy uses."""

    name: str
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...]  # kubernetes.io/arch values
    hypervisor: str  # "" for bare metal
    bare_metal: bool
    max_network_interfaces: int
    ipv4_per_interface: int
    usage_classes: tuple[str, ...]  # karpenter.sh/capacity-type values
    cpu_manufacturer: str = ""
    clock_mhz: int = 0
    ebs_bandwidth_mbps: int = 0
    network_bandwidth_mbps: int = 0
    encryption_in_transit: bool = False
    local_nvme_gib: int = 0
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    gpu_count: int = 0
    gpu_memory_mib: int = 0
    accelerator_name: str = ""
    accelerator_manufacturer: str = ""
    accelerator_count: int = 0
    neuron_cores: int = 0
    efa_count: int = 0
    max_network_cards: int = 1
    instance_store_gb: int = 0


def parse_instance_type(raw: Mapping[str, Any]) -> InstanceTypeInfo:
    """One DescribeInstanceTypes entry -> InstanceTypeInfo (pure)."""
    processor = raw.get("ProcessorInfo", {})
    network = raw.get("NetworkInfo", {})
    storage = raw.get("InstanceStorageInfo", {})
    gpus = raw.get("GpuInfo", {}).get("Gpus", [])
    neuron = raw.get("NeuronInfo", {}).get("NeuronDevices", [])
    inference = raw.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
    cards = network.get("NetworkCards", [])
    accelerators = neuron or inference
    gpu = gpus[0] if gpus else {}
    accel = accelerators[0] if accelerators else {}
    usage = {"on-demand": wk.CAPACITY_TYPE_ON_DEMAND, "spot": wk.CAPACITY_TYPE_SPOT}
    return InstanceTypeInfo(
        name=str(raw["InstanceType"]),
        vcpus=int(raw["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(raw["MemoryInfo"]["SizeInMiB"]),
        architectures=tuple(
            EC2_ARCH_TO_K8S[a]
            for a in processor.get("SupportedArchitectures", [])
            if a in EC2_ARCH_TO_K8S
        ),
        hypervisor=str(raw.get("Hypervisor", "")),
        bare_metal=bool(raw.get("BareMetal", False)),
        max_network_interfaces=int(network.get("MaximumNetworkInterfaces", 1)),
        ipv4_per_interface=int(network.get("Ipv4AddressesPerInterface", 1)),
        usage_classes=tuple(usage[u] for u in raw.get("SupportedUsageClasses", []) if u in usage),
        cpu_manufacturer=str(processor.get("Manufacturer", "")).lower(),
        clock_mhz=round(float(processor.get("SustainedClockSpeedInGhz", 0)) * 1000),
        ebs_bandwidth_mbps=int(
            raw.get("EbsInfo", {}).get("EbsOptimizedInfo", {}).get("BaselineBandwidthInMbps", 0)
        ),
        network_bandwidth_mbps=round(
            sum(float(c.get("BaselineBandwidthInGbps", 0)) for c in cards) * 1000
        ),
        encryption_in_transit=bool(network.get("EncryptionInTransitSupported", False)),
        local_nvme_gib=int(storage.get("TotalSizeInGB", 0))
        if storage.get("NvmeSupport", "unsupported") != "unsupported"
        else 0,
        gpu_name=str(gpu.get("Name", "")).lower(),
        gpu_manufacturer=str(gpu.get("Manufacturer", "")).lower(),
        gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
        gpu_memory_mib=int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)),
        accelerator_name=str(accel.get("Name", "")).lower(),
        accelerator_manufacturer=str(accel.get("Manufacturer", "aws" if neuron else "")).lower(),
        accelerator_count=sum(int(a.get("Count", 0)) for a in accelerators),
        neuron_cores=sum(
            int(d.get("Count", 0)) * int(d.get("CoreInfo", {}).get("Count", 0)) for d in neuron
        ),
        efa_count=int(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0))
        if network.get("EfaSupported")
        else 0,
        max_network_cards=int(network.get("MaximumNetworkCards", 1)),
        instance_store_gb=int(storage.get("TotalSizeInGB", 0)),
    )


def instance_labels(info: InstanceTypeInfo, *, arch: str) -> Mapping[str, str]:
    """The well-known labels of ``info`` for one architecture (zone/capacity type excluded)."""
    labels: dict[str, str] = {
        wk.LABEL_INSTANCE_TYPE: info.name,
        wk.LABEL_ARCH: arch,
        wk.LABEL_OS: wk.OS_LINUX,
        awslabels.LABEL_AWS_INSTANCE_CPU: str(info.vcpus),
        awslabels.LABEL_AWS_INSTANCE_MEMORY: str(info.memory_mib),
        awslabels.LABEL_AWS_INSTANCE_HYPERVISOR: info.hypervisor,
        awslabels.LABEL_AWS_INSTANCE_ENCRYPTION_IN_TRANSIT: str(info.encryption_in_transit).lower(),
    }
    family, _, size = info.name.partition(".")
    labels[awslabels.LABEL_AWS_INSTANCE_FAMILY] = family
    labels[awslabels.LABEL_AWS_INSTANCE_SIZE] = size
    match = _NAME.match(info.name)
    if match:
        labels[awslabels.LABEL_AWS_INSTANCE_CATEGORY] = match["category"]
        labels[awslabels.LABEL_AWS_INSTANCE_GENERATION] = match["generation"]
    optional = {
        awslabels.LABEL_AWS_INSTANCE_CPU_MANUFACTURER: info.cpu_manufacturer,
        awslabels.LABEL_AWS_INSTANCE_CPU_CLOCK: info.clock_mhz,
        awslabels.LABEL_AWS_INSTANCE_EBS_BANDWIDTH: info.ebs_bandwidth_mbps,
        awslabels.LABEL_AWS_INSTANCE_NETWORK_BANDWIDTH: info.network_bandwidth_mbps,
        awslabels.LABEL_AWS_INSTANCE_LOCAL_NVME: info.local_nvme_gib,
        awslabels.LABEL_AWS_INSTANCE_GPU_NAME: info.gpu_name,
        awslabels.LABEL_AWS_INSTANCE_GPU_MANUFACTURER: info.gpu_manufacturer,
        awslabels.LABEL_AWS_INSTANCE_GPU_COUNT: info.gpu_count,
        awslabels.LABEL_AWS_INSTANCE_GPU_MEMORY: info.gpu_memory_mib,
        awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_NAME: info.accelerator_name,
        awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_MANUFACTURER: info.accelerator_manufacturer,
        awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_COUNT: info.accelerator_count,
    }
    labels.update({k: str(v) for k, v in optional.items() if v})
    return _freeze(labels)


def eni_limited_pods(info: InstanceTypeInfo, *, reserved_enis: int = DEFAULT_RESERVED_ENIS) -> int:
    """Pods the VPC CNI can address: (ENIs - reserved) * (IPv4 per ENI - 1) + 2."""
    enis = max(0, info.max_network_interfaces - reserved_enis)
    return enis * max(0, info.ipv4_per_interface - 1) + 2


@attrs.frozen(kw_only=True)
class KubeletSettings:
    """The kubelet fields that change capacity or overhead (from EC2NodeClass ``kubelet``).

    Reservations map resource names (cpu, memory, ephemeral-storage) to Kubernetes quantities;
    eviction maps signals (memory.available, nodefs.available) to a quantity or a percentage.
    Pairs are kept sorted so equal settings compare and hash equal.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Tags = attrs.field(default=(), converter=freeze_tags)
    system_reserved: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_hard: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_soft: Tags = attrs.field(default=(), converter=freeze_tags)


def max_pods(
    info: InstanceTypeInfo,
    *,
    family: AMIFamily,
    kubelet: KubeletSettings,
    reserved_enis: int = DEFAULT_RESERVED_ENIS,
) -> int:
    """kubelet maxPods, else ENI-limited (AL2/AL2023), else 110; capped by podsPerCore."""
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif family in ENI_LIMITED_FAMILIES:
        count = eni_limited_pods(info, reserved_enis=reserved_enis)
    else:
        count = DEFAULT_MAX_PODS
    if kubelet.pods_per_core:
        count = min(count, kubelet.pods_per_core * info.vcpus)
    return count


def capacity(
    info: InstanceTypeInfo,
    *,
    pods: int,
    ephemeral_storage_gib: int = DEFAULT_EPHEMERAL_STORAGE_GIB,
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT,
    instance_store_raid0: bool = False,
    efa_interfaces: int | None = None,
    learned_memory: int | None = None,
) -> Resources:
    """What the node will report as capacity (cpu in millicores, bytes for memory/storage).
    With ``instance_store_raid0`` a type with instance storage keeps its ephemeral storage on
    the RAID0 array of its local disks, so that array's size (EC2 gives it in GB) is the
    node's ephemeral storage; other types keep the EBS volume's. ``efa_interfaces`` is how
    many EFA interfaces the NodeClass's own interface list attaches (None: no list, so a
    launch for EFA attaches all the type takes). ``learned_memory`` (bytes), what a registered
    node of the type reported, replaces the guess from ``vm_memory_overhead_percent``."""
    overhead_mib = math.ceil(info.memory_mib * vm_memory_overhead_percent)
    ephemeral = ephemeral_storage_gib * GIB
    if instance_store_raid0 and info.instance_store_gb:
        ephemeral = info.instance_store_gb * 10**9
    out = {
        CPU: info.vcpus * 1000,
        MEMORY: learned_memory or (info.memory_mib - overhead_mib) * MIB,
        PODS: pods,
        EPHEMERAL_STORAGE: ephemeral,
    }
    gpu_resource = _GPU_RESOURCES.get(info.gpu_manufacturer)
    if gpu_resource and info.gpu_count:
        out[gpu_resource] = info.gpu_count
    if info.accelerator_manufacturer == "aws" and info.accelerator_count:
        out[AWS_NEURON] = info.accelerator_count
        if info.neuron_cores:
            out[AWS_NEURON_CORE] = info.neuron_cores
    efa = info.efa_count if efa_interfaces is None else min(efa_interfaces, info.efa_count)
    if efa:
        out[EFA] = efa
    branches = branch_interfaces(info.name)
    if branches:
        out[POD_ENI] = branches
    return _freeze(out)


def default_kube_reserved(*, cpu_millis: int, pods: int) -> Resources:
    """Karpenter's default kubeReserved: the CPU ladder, 11Mi per pod + 255Mi, 1Gi storage."""
    cpu = 0.0
    for start, end, fraction in KUBE_RESERVED_CPU_LADDER:
        if cpu_millis > start:
            cpu += (min(cpu_millis, end) - start) * fraction
    return _freeze(
        {
            CPU: int(cpu),
            MEMORY: (11 * pods + 255) * MIB,
            EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_STORAGE,
        }
    )


def default_eviction_hard(*, memory: int, ephemeral_storage: int) -> Resources:
    """memory.available 100Mi and nodefs.available 10% of the root volume."""
    del memory  # the default memory threshold is absolute
    return _freeze(
        {
            MEMORY: EVICTION_HARD_MEMORY,
            EPHEMERAL_STORAGE: math.ceil(ephemeral_storage * EVICTION_HARD_NODEFS_PERCENT / 100),
        }
    )


def _base_units(name: str, quantity: str, *, field: str) -> int:
    try:
        milli = parse_quantity(quantity)
    except QuantityError as e:
        raise ConfigurationError(f"kubelet.{field}[{name}]: {e}") from e
    return milli if name == CPU else math.ceil(milli / 1000)


def _reservation(pairs: Tags, *, field: str) -> dict[str, int]:
    return {
        name: _base_units(name, value, field=field)
        for name, value in pairs
        if name in (CPU, MEMORY, EPHEMERAL_STORAGE)
    }


def _signal(value: str, *, capacity: int, field: str, signal: str) -> int:
    if value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError as e:
            raise ConfigurationError(f"kubelet.{field}[{signal}]: bad percentage {value!r}") from e
        return math.ceil(capacity * percent / 100)
    return _base_units(MEMORY, value, field=f"{field}[{signal}]")


def eviction_threshold(cap: Resources, *, kubelet: KubeletSettings) -> Resources:
    """The defaults, each replaced by the larger of evictionHard and evictionSoft for its signal
    (percentages are of the resource's capacity), as Karpenter computes it."""
    out = dict(default_eviction_hard(memory=cap[MEMORY], ephemeral_storage=cap[EPHEMERAL_STORAGE]))
    override: dict[str, int] = {}
    for field, pairs in (
        ("evictionHard", kubelet.eviction_hard),
        ("evictionSoft", kubelet.eviction_soft),
    ):
        for signal, value in pairs:
            resource = {"memory.available": MEMORY, "nodefs.available": EPHEMERAL_STORAGE}.get(
                signal
            )
            if resource is None:
                continue
            amount = _signal(value, capacity=cap[resource], field=field, signal=signal)
            override[resource] = max(override.get(resource, 0), amount)
    out.update(override)
    return _freeze(out)


@attrs.frozen(kw_only=True)
class Overhead:
    """Resources the node keeps for itself."""

    kube_reserved: Resources
    system_reserved: Resources
    eviction_threshold: Resources

    def total(self) -> Resources:
        out: dict[str, int] = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for name, value in part.items():
                out[name] = out.get(name, 0) + value
        return _freeze(out)


def overhead(cap: Resources, *, kubelet: KubeletSettings) -> Overhead:
    """kube-reserved (defaults, overridden per resource by the settings), system-reserved and
    the eviction threshold. Raises ConfigurationError naming the field for a bad quantity."""
    kube_reserved = dict(default_kube_reserved(cpu_millis=cap[CPU], pods=cap[PODS]))
    kube_reserved.update(_reservation(kubelet.kube_reserved, field="kubeReserved"))
    return Overhead(
        kube_reserved=_freeze(kube_reserved),
        system_reserved=_freeze(_reservation(kubelet.system_reserved, field="systemReserved")),
        eviction_threshold=eviction_threshold(cap, kubelet=kubelet),
    )


def allocatable(cap: Resources, over: Overhead) -> Resources:
    """capacity - overhead, never below zero."""
    total = over.total()
    return _freeze({k: max(0, v - total.get(k, 0)) for k, v in cap.items()})
