"""EC2NodeClass spec -> the narrow values karpy_aws's discovery and launch code take.

The API model (``karpy_aws.apis.ec2nodeclass``) mirrors the CRD; the AWS building blocks take
small frozen values instead, so they can be tested and reused without a whole NodeClass. This
module is the single translation between the two, and it is where input the CRD schema cannot
catch becomes a ConfigurationError that names the field — the NodeClass controller turns that
into a not-Ready condition. Pure.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Literal

import orjson

from karpy.apis.codec import to_dict
from karpy.core.resources import QuantityError, parse_quantity
from karpy_aws.apis import ec2nodeclass as api
from karpy_aws.apis.kubelet import KubeletConfiguration
from karpy_aws.apis.labels import (
    ANNOTATION_EC2NODECLASS_HASH,
    ANNOTATION_EC2NODECLASS_HASH_VERSION,
)
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.amifamily.amis import AMIFamily, parse_alias
from karpy_aws.providers.amifamily.userdata import KubeletConfig
from karpy_aws.providers.instancetype.instancetypes import (
    DEFAULT_EPHEMERAL_STORAGE_GIB,
    GIB,
    KubeletSettings,
)
from karpy_aws.providers.launchtemplate import (
    BlockDevice,
    ConnectionTracking,
    Interface,
    MetadataOptions,
    default_block_devices,
)
from karpy_aws.providers.selectors import SelectorTerm

# The device whose size becomes the node's ephemeral storage when no mapping is the root volume.
_EPHEMERAL_DEVICE = {
    AMIFamily.AL2: "/dev/xvda",
    AMIFamily.AL2023: "/dev/xvda",
    AMIFamily.BOTTLEROCKET: "/dev/xvdb",
    AMIFamily.WINDOWS2019: "/dev/sda1",
    AMIFamily.WINDOWS2022: "/dev/sda1",
    AMIFamily.WINDOWS2025: "/dev/sda1",
}


def validate_spec(spec: api.EC2NodeClassSpec) -> None:
    """Checks the CRD's CEL rules would make, repeated here so that objects that bypassed the
    apiserver (or came from an old CRD) fail with a clear message."""
    refused = api.not_yet_supported(spec)
    if refused:
        raise ConfigurationError("; ".join(refused))
    if (spec.role is None) == (spec.instance_profile is None):
        raise ConfigurationError(
            "spec: must specify exactly one of ['role', 'instanceProfile'] "
            f"(role={spec.role!r}, instanceProfile={spec.instance_profile!r})"
        )
    ami_family(spec)


def subnet_terms(spec: api.EC2NodeClassSpec) -> tuple[SelectorTerm, ...]:
    return tuple(SelectorTerm(tags=t.tags, id=t.id) for t in spec.subnet_selector_terms)


def security_group_terms(spec: api.EC2NodeClassSpec) -> tuple[SelectorTerm, ...]:
    return tuple(
        SelectorTerm(tags=t.tags, id=t.id, name=t.name) for t in spec.security_group_selector_terms
    )


def ami_family(spec: api.EC2NodeClassSpec) -> AMIFamily:
    """``amiFamily`` if set, else the alias's family; ConfigurationError if neither."""
    if spec.ami_family is not None:
        return AMIFamily(spec.ami_family.value)
    aliases = [t.alias for t in spec.ami_selector_terms if t.alias is not None]
    if aliases:
        return parse_alias(aliases[0]).family
    raise ConfigurationError(
        "spec.amiFamily: required when amiSelectorTerms does not contain an alias"
    )


def kubelet_settings(kubelet: KubeletConfiguration | None) -> KubeletSettings:
    """What shapes capacity and overhead."""
    if kubelet is None:
        return KubeletSettings()
    return KubeletSettings(
        max_pods=kubelet.max_pods,
        pods_per_core=kubelet.pods_per_core,
        kube_reserved=dict(kubelet.kube_reserved),
        system_reserved=dict(kubelet.system_reserved),
        eviction_hard=dict(kubelet.eviction_hard),
        eviction_soft=dict(kubelet.eviction_soft),
    )


def kubelet_config(
    kubelet: KubeletConfiguration | None, *, max_pods: int, default_dns: str | None = None
) -> KubeletConfig:
    """What goes into user data; ``max_pods`` is the value capacity was computed with, and
    ``default_dns`` (the cluster's kube-dns address) is the clusterDNS when the class names
    none."""
    fallback_dns = (default_dns,) if default_dns else ()
    if kubelet is None:
        return KubeletConfig(max_pods=max_pods, cluster_dns=fallback_dns)
    return KubeletConfig(
        max_pods=max_pods,
        cluster_dns=tuple(kubelet.cluster_dns) or fallback_dns,
        system_reserved=dict(kubelet.system_reserved),
        kube_reserved=dict(kubelet.kube_reserved),
        eviction_hard=dict(kubelet.eviction_hard),
        eviction_soft=dict(kubelet.eviction_soft),
        eviction_soft_grace_period=dict(kubelet.eviction_soft_grace_period),
        eviction_max_pod_grace_period=kubelet.eviction_max_pod_grace_period,
        image_gc_high_threshold_percent=kubelet.image_gc_high_threshold_percent,
        image_gc_low_threshold_percent=kubelet.image_gc_low_threshold_percent,
        cpu_cfs_quota=kubelet.cpu_cfs_quota,
    )


def _gib(quantity: str, *, where: str) -> int:
    try:
        return math.ceil(parse_quantity(quantity) / 1000 / GIB)
    except QuantityError as e:
        raise ConfigurationError(f"{where}.volumeSize: {e}") from e


def block_devices(spec: api.EC2NodeClassSpec, family: AMIFamily) -> tuple[BlockDevice, ...]:
    """The NodeClass's mappings, or the family's defaults when it lists none."""
    if not spec.block_device_mappings:
        return default_block_devices(family)
    out = []
    for index, mapping in enumerate(spec.block_device_mappings):
        where = f"spec.blockDeviceMappings[{index}]"
        if mapping.device_name is None or mapping.ebs is None:
            raise ConfigurationError(f"{where}: deviceName and ebs are required")
        ebs = mapping.ebs
        if ebs.volume_size is None and ebs.snapshot_id is None:
            raise ConfigurationError(f"{where}.ebs: snapshotID or volumeSize must be defined")
        out.append(
            BlockDevice(
                device_name=mapping.device_name,
                volume_size_gib=_gib(ebs.volume_size, where=f"{where}.ebs")
                if ebs.volume_size is not None
                else 0,
                volume_type=ebs.volume_type.value if ebs.volume_type is not None else "gp3",
                encrypted=True if ebs.encrypted is None else ebs.encrypted,
                delete_on_termination=True
                if ebs.delete_on_termination is None
                else ebs.delete_on_termination,
                iops=ebs.iops,
                throughput=ebs.throughput,
                kms_key_id=ebs.kms_key_id,
                snapshot_id=ebs.snapshot_id,
                volume_initialization_rate=ebs.volume_initialization_rate,
            )
        )
    return tuple(out)


def ephemeral_storage_gib(spec: api.EC2NodeClassSpec, family: AMIFamily) -> int:
    """Size of the volume that backs ephemeral storage: the mapping marked rootVolume, else the
    family's data device, else 20 GiB."""
    for mapping in spec.block_device_mappings:
        if mapping.root_volume and mapping.ebs and mapping.ebs.volume_size:
            return _gib(mapping.ebs.volume_size, where="spec.blockDeviceMappings")
    device = _EPHEMERAL_DEVICE.get(family)
    for bd in block_devices(spec, family):
        if bd.device_name == device and bd.volume_size_gib:
            return bd.volume_size_gib
    return DEFAULT_EPHEMERAL_STORAGE_GIB


def metadata_options(spec: api.EC2NodeClassSpec) -> MetadataOptions:
    m = spec.metadata_options
    for name, value, allowed in (
        ("httpEndpoint", m.http_endpoint, ("enabled", "disabled")),
        ("httpProtocolIPv6", m.http_protocol_ipv6, ("enabled", "disabled")),
        ("httpTokens", m.http_tokens, ("required", "optional")),
    ):
        if value not in allowed:
            raise ConfigurationError(
                f"spec.metadataOptions.{name}: {value!r} is not one of {list(allowed)}"
            )
    return MetadataOptions(
        http_endpoint="enabled" if m.http_endpoint == "enabled" else "disabled",
        http_protocol_ipv6="enabled" if m.http_protocol_ipv6 == "enabled" else "disabled",
        http_put_response_hop_limit=m.http_put_response_hop_limit,
        http_tokens="required" if m.http_tokens == "required" else "optional",
    )


def connection_tracking(spec: api.EC2NodeClassSpec) -> ConnectionTracking | None:
    """The primary interface's connection-tracking timeouts, if the NodeClass sets any."""
    c = spec.connection_tracking
    if c is None:
        return None
    return ConnectionTracking(
        tcp_established_timeout=c.tcp_established_timeout,
        udp_stream_timeout=c.udp_stream_timeout,
        udp_timeout=c.udp_timeout,
    )


def network_interfaces(spec: api.EC2NodeClassSpec) -> tuple[Interface, ...]:
    """The NodeClass's interfaces, checked as EC2 will: one primary (card 0, device 0) that
    carries IP traffic, and no card and device index used twice."""
    out = tuple(
        Interface(
            network_card_index=i.network_card_index,
            device_index=i.device_index,
            interface_type="efa-only" if i.interface_type.value == "efa-only" else "interface",
        )
        for i in spec.network_interfaces
    )
    if not out:
        return out
    primary = [i for i in out if i.primary]
    if len(primary) != 1 or primary[0].interface_type != "interface":
        raise ConfigurationError(
            "spec.networkInterfaces: needs exactly one primary interface (networkCardIndex 0, "
            "deviceIndex 0) of interfaceType 'interface', which carries the node's address"
        )
    seen: set[tuple[int, int]] = set()
    for index, i in enumerate(out):
        slot = (i.network_card_index, i.device_index)
        if slot in seen:
            raise ConfigurationError(
                f"spec.networkInterfaces[{index}]: networkCardIndex {slot[0]} deviceIndex "
                f"{slot[1]} is listed twice"
            )
        seen.add(slot)
    return out


def instance_store_raid0(spec: api.EC2NodeClassSpec, family: AMIFamily) -> bool:
    """Whether local instance-store disks become one RAID0 array for ephemeral storage
    (``instanceStorePolicy: RAID0``); Windows user data has no way to ask for it."""
    if spec.instance_store_policy is None:
        return False
    if family in (AMIFamily.WINDOWS2019, AMIFamily.WINDOWS2022, AMIFamily.WINDOWS2025):
        raise ConfigurationError(
            f"spec.instanceStorePolicy: RAID0 is not available for amiFamily {family.value}"
        )
    return True


def nested_virtualization(spec: api.EC2NodeClassSpec) -> Literal["enabled", "disabled"] | None:
    """``cpuOptions.nestedVirtualization`` for the launch template's CpuOptions."""
    value = spec.cpu_options.nested_virtualization if spec.cpu_options is not None else None
    if value is None:
        return None
    if value not in ("enabled", "disabled"):
        raise ConfigurationError(
            f"spec.cpuOptions.nestedVirtualization: {value!r} is not one of ['enabled', 'disabled']"
        )
    return "enabled" if value == "enabled" else "disabled"


# Bumped when what the hash below covers changes, so that a NodeClaim stamped by an older karpy
# is not compared with a hash computed another way (every node would drift on upgrade); the
# EC2NodeClass controller re-stamps such NodeClaims with the current version and hash
# (rehash_annotations). v2: the AMI family is hashed as resolved, not as written.
NODECLASS_HASH_VERSION = "v2"
# Selector terms are resolved into status and checked one by one (AMI, subnet, security group
# and capacity reservation drift), so they are left out of the static hash, as Karpenter leaves
# them out. The placement group selector stays in: no per-instance check follows it, so a
# changed selector drifts through the hash. ``amiFamily`` is replaced by the family a launch
# uses: writing out the family an alias already implies changes nothing on a node.
_DYNAMIC_FIELDS = (
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "amiSelectorTerms",
    "capacityReservationSelectorTerms",
    "amiFamily",
)


def static_hash(spec: api.EC2NodeClassSpec) -> str:
    """Digest of what in the spec shapes a launch and is not resolved into status (everything
    but the selector terms, with the AMI family as resolved); a NodeClaim whose
    ``karpenter.k8s.aws/ec2nodeclass-hash`` differs has NodeClassDrift. Unset fields are not
    on the wire, so a field added to the API does not change the hash of specs without it."""
    wire = {k: v for k, v in to_dict(spec).items() if k not in _DYNAMIC_FIELDS}
    try:
        wire["amiFamily"] = ami_family(spec).value
    except ConfigurationError:
        wire["amiFamily"] = None  # not launchable; the status says why
    return hashlib.sha256(orjson.dumps(wire, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def rehash_annotations(
    annotations: Mapping[str, str], *, current_hash: str, drifted: bool
) -> dict[str, str] | None:
    """The hash annotations to write on a NodeClaim stamped with another hash version (None
    when its version is current): the current version, and the NodeClass's current hash unless
    the NodeClaim is already Drifted (whether it still is cannot be told across a change of
    what is hashed, so it stays drifted, as in Karpenter). A NodeClaim not launched yet (no
    hash) is left to its launch, which stamps both."""
    if ANNOTATION_EC2NODECLASS_HASH not in annotations:
        return None
    if annotations.get(ANNOTATION_EC2NODECLASS_HASH_VERSION) == NODECLASS_HASH_VERSION:
        return None
    update = {ANNOTATION_EC2NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION}
    if not drifted:
        update[ANNOTATION_EC2NODECLASS_HASH] = current_hash
    return update
