"""Kubelet settings of an EC2NodeClass (the typed KubeletConfiguration of Karpenter v1.0-v1.6).

These values end up in the node's bootstrap configuration and also shape scheduling (maxPods,
reserved resources and eviction thresholds decide allocatable), so the apiserver refuses
unknown eviction signals and reserved-resource names before any node is launched.
"""

# karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping

import attrs

from karpy.apis.meta import Quantity
from karpy.apis.schema import Rule, field

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")


def _cel_names(names: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _keys_rule(field_name: str, names: tuple[str, ...]) -> Rule:
    return Rule(
        rule=f"self.all(x, x in {_cel_names(names)})",
        message=f"valid keys for {field_name} are {_cel_names(names)}",
    )


def _reserved(field_name: str, doc: str) -> Mapping[str, Quantity]:
    result: Mapping[str, Quantity] = field(
        factory=dict,
        doc=doc,
        crd_default=False,
        max_properties=len(RESERVED_RESOURCES),
        rules=(
            _keys_rule(field_name, RESERVED_RESOURCES),
            Rule(
                rule="self.all(x, !self[x].startsWith('-'))",
                message=f"{field_name} value cannot be a negative resource quantity",
            ),
        ),
    )
    return result


def _eviction(field_name: str, doc: str) -> Mapping[str, str]:
    result: Mapping[str, str] = field(
        factory=dict,
        doc=doc,
        crd_default=False,
        max_properties=len(EVICTION_SIGNALS),
        rules=(_keys_rule(field_name, EVICTION_SIGNALS),),
    )
    return result


@attrs.frozen(kw_only=True)
class KubeletConfiguration:
    __rules__ = (
        Rule(
            rule=(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true"
            ),
            message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            field_path=".imageGCHighThresholdPercent",
        ),
        Rule(
            rule=(
                "has(self.evictionSoft) ? self.evictionSoft.all(e, "
                "has(self.evictionSoftGracePeriod) && e in self.evictionSoftGracePeriod) : true"
            ),
            message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            field_path=".evictionSoft",
        ),
        Rule(
            rule=(
                "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, "
                "has(self.evictionSoft) && e in self.evictionSoft) : true"
            ),
            message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            field_path=".evictionSoftGracePeriod",
        ),
    )

    cluster_dns: tuple[str, ...] = field(
        factory=tuple,
        wire="clusterDNS",
        doc="DNS server IPs for pods.",
        crd_default=False,
        max_items=16,
    )
    max_pods: int | None = field(
        default=None, doc="Maximum pods per node.", minimum=0, format="int32"
    )
    pods_per_core: int | None = field(
        default=None, doc="Maximum pods per vCPU (the lower of this and maxPods wins).", minimum=0
    )
    system_reserved: Mapping[str, Quantity] = _reserved(
        "systemReserved", "Resources reserved for OS daemons."
    )
    kube_reserved: Mapping[str, Quantity] = _reserved(
        "kubeReserved", "Resources reserved for Kubernetes daemons."
    )
    eviction_hard: Mapping[str, str] = _eviction(
        "evictionHard", "Hard eviction thresholds by signal."
    )
    eviction_soft: Mapping[str, str] = _eviction(
        "evictionSoft", "Soft eviction thresholds by signal; each needs a grace period."
    )
    eviction_soft_grace_period: Mapping[str, str] = _eviction(
        "evictionSoftGracePeriod", "Grace period for each soft eviction threshold."
    )
    eviction_max_pod_grace_period: int | None = field(
        default=None, doc="Maximum pod termination grace period on soft eviction, in seconds."
    )
    image_gc_high_threshold_percent: int | None = field(
        default=None,
        wire="imageGCHighThresholdPercent",
        doc="Disk usage percent that always triggers image garbage collection.",
        minimum=0,
        maximum=100,
    )
    image_gc_low_threshold_percent: int | None = field(
        default=None,
        wire="imageGCLowThresholdPercent",
        doc="Disk usage percent image garbage collection never goes below.",
        minimum=0,
        maximum=100,
    )
    cpu_cfs_quota: bool | None = field(
        default=None, wire="cpuCFSQuota", doc="Enforce CPU limits with CFS quota."
    )
