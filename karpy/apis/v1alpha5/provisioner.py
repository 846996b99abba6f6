"""Provisioner (karpenter.sh/v1alpha5): the API of Karpenter v0.5-v0.31, served so that the
manifests people wrote then apply to karpy as they are.

karpy does not launch from a Provisioner directly: `karpy.apis.v1alpha5.translate` turns each one
into a NodePool (and the provider's NodeClass), which the legacy controller keeps in step. The
schema refuses what Karpenter's v1alpha5 webhook refused (a requirement key that is not a
qualified name, a restricted label domain, both ttlSecondsAfterEmpty and consolidation), naming
the field, instead of repairing it.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import (
    LABEL_VALUE_PATTERN,
    QUALIFIED_NAME_PATTERN,
    QUANTITY_PATTERN,
    Condition,
    ObjectMeta,
    Quantity,
    conditions_field,
)
from karpy.apis.schema import Rule, field, item
from karpy.apis.v1 import labels
from karpy.apis.v1.common import (
    REQUIREMENT_RULES,
    TEMPLATE_LABEL_RULES,
    RequirementOperator,
    allowed_restricted_keys,
    label_key_rules,
)
from karpy.apis.v1alpha5.awsprovider import AWSProvider

API_VERSION = f"{labels.GROUP}/v1alpha5"

LEGACY_OPERATORS = (
    RequirementOperator.IN,
    RequirementOperator.NOT_IN,
    RequirementOperator.EXISTS,
    RequirementOperator.DOES_NOT_EXIST,
    RequirementOperator.GT,
    RequirementOperator.LT,
)


@attrs.frozen(kw_only=True)
class Requirement:
    """A v1alpha5 node selector requirement (no minValues, no Gte/Lte)."""

    # Karpenter v1alpha5 had no minValues, so its rule is left out (CEL would not compile).
    __rules__ = tuple(r for r in REQUIREMENT_RULES if "minValues" not in r.rule)

    key: str = field(
        doc="The label key the requirement constrains; must be a qualified name.",
        pattern=QUALIFIED_NAME_PATTERN,
        max_length=316,
        rules=label_key_rules(
            allowed=allowed_restricted_keys, over_map=False, forbid_nodepool=True
        ),
    )
    operator: RequirementOperator = field(
        doc="In, NotIn, Exists, DoesNotExist, Gt or Lt.",
        enum=tuple(op.value for op in LEGACY_OPERATORS),
    )
    values: tuple[str, ...] = field(
        factory=tuple,
        doc="Values for In/NotIn; one integer for Gt/Lt.",
        crd_default=False,
        max_items=1000,
        items=item(max_length=63, pattern=LABEL_VALUE_PATTERN),
    )


@attrs.frozen(kw_only=True)
class KubeletConfiguration:
    """v1alpha5 kubelet settings; in v1 they live on the NodeClass (EC2NodeClass.spec.kubelet)."""

    cluster_dns: tuple[str, ...] = field(
        factory=tuple, wire="clusterDNS", doc="DNS server IPs for pods.", crd_default=False
    )
    container_runtime: str | None = field(
        default=None,
        doc="Container runtime; v1 nodes always run containerd (dockerd was removed).",
        enum=("containerd", "dockerd"),
    )
    max_pods: int | None = field(default=None, doc="Maximum pods per node.", minimum=0)
    pods_per_core: int | None = field(default=None, doc="Pods per CPU core.", minimum=0)
    system_reserved: Mapping[str, Quantity] = field(
        factory=dict,
        doc="Resources reserved for the OS.",
        crd_default=False,
        values=item(pattern=QUANTITY_PATTERN),
    )
    kube_reserved: Mapping[str, Quantity] = field(
        factory=dict,
        doc="Resources reserved for Kubernetes daemons.",
        crd_default=False,
        values=item(pattern=QUANTITY_PATTERN),
    )
    eviction_hard: Mapping[str, str] = field(
        factory=dict, doc="Hard eviction thresholds.", crd_default=False
    )
    eviction_soft: Mapping[str, str] = field(
        factory=dict, doc="Soft eviction thresholds.", crd_default=False
    )
    eviction_soft_grace_period: Mapping[str, str] = field(
        factory=dict, doc="Grace periods of the soft thresholds.", crd_default=False
    )
    eviction_max_pod_grace_period: int | None = field(
        default=None, doc="Maximum pod grace period on soft eviction, in seconds."
    )
    image_gc_high_threshold_percent: int | None = field(
        default=None,
        wire="imageGCHighThresholdPercent",
        doc="Disk usage that starts image GC.",
        minimum=0,
        maximum=100,
    )
    image_gc_low_threshold_percent: int | None = field(
        default=None,
        wire="imageGCLowThresholdPercent",
        doc="Disk usage image GC frees down to.",
        minimum=0,
        maximum=100,
    )
    cpu_cfs_quota: bool | None = field(
        default=None, wire="cpuCFSQuota", doc="Enforce CPU limits with CFS quota."
    )


@attrs.frozen(kw_only=True)
class Limits:
    resources: Mapping[str, Quantity] = field(
        factory=dict,
        doc="Upper bound on the summed capacity of the provisioner's nodes.",
        crd_default=False,
        values=item(pattern=QUANTITY_PATTERN),
    )


@attrs.frozen(kw_only=True)
class Consolidation:
    enabled: bool | None = field(
        default=None, doc="Replace or remove underutilized nodes (WhenEmptyOrUnderutilized)."
    )


@attrs.frozen(kw_only=True)
class ProviderRef:
    """Points at the provider's node template (AWSNodeTemplate)."""

    name: str = field(doc="Name of the node template.", min_length=1, max_length=253)
    kind: str | None = field(default=None, doc="Kind of the node template (AWSNodeTemplate).")
    api_version: str | None = field(
        default=None, doc="API version of the node template (karpenter.k8s.aws/v1alpha1)."
    )


@attrs.frozen(kw_only=True)
class ClusterSettings:
    """`spec.cluster` of Karpenter v0.3 and older; later versions read it from global settings."""

    name: str | None = field(default=None, doc="Cluster name (karpy: --cluster-name).")
    endpoint: str | None = field(default=None, doc="Cluster endpoint (karpy: --cluster-endpoint).")
    ca_bundle: str | None = field(default=None, doc="Cluster CA bundle.")


PROVISIONER_SPEC_RULES = (
    Rule(
        rule="!(has(self.ttlSecondsAfterEmpty) && has(self.consolidation) && "
        "has(self.consolidation.enabled) && self.consolidation.enabled)",
        message="expected exactly one, got both: ttlSecondsAfterEmpty, consolidation.enabled",
    ),
    Rule(
        rule="!(has(self.provider) && has(self.providerRef))",
        message="expected exactly one, got both: provider, providerRef",
    ),
)


@attrs.frozen(kw_only=True)
class ProvisionerSpec:
    labels: Mapping[str, str] = field(
        factory=dict,
        doc="Labels applied to every node.",
        crd_default=False,
        max_properties=100,
        values=item(max_length=63, pattern=LABEL_VALUE_PATTERN),
        rules=TEMPLATE_LABEL_RULES,
    )
    annotations: Mapping[str, str] = field(
        factory=dict, doc="Annotations applied to every node.", crd_default=False
    )
    taints: tuple[Taint, ...] = field(
        factory=tuple, doc="Taints applied to every node.", crd_default=False, max_items=100
    )
    startup_taints: tuple[Taint, ...] = field(
        factory=tuple,
        doc="Taints an agent removes after boot.",
        crd_default=False,
        max_items=100,
    )
    requirements: tuple[Requirement, ...] = field(
        factory=tuple, doc="Constraints on the launched nodes.", crd_default=False, max_items=100
    )
    kubelet_configuration: KubeletConfiguration | None = field(
        default=None, doc="Kubelet settings (moved to the NodeClass in v1)."
    )
    provider: AWSProvider | None = field(
        default=None, doc="Inline AWS settings (v1: an EC2NodeClass)."
    )
    provider_ref: ProviderRef | None = field(
        default=None, doc="The node template (v1: nodeClassRef to an EC2NodeClass)."
    )
    ttl_seconds_after_empty: int | None = field(
        default=None,
        doc="Seconds an empty node lives (v1: WhenEmpty + consolidateAfter).",
        minimum=0,
    )
    ttl_seconds_until_expired: int | None = field(
        default=None, doc="Maximum node lifetime in seconds (v1: expireAfter).", minimum=0
    )
    consolidation: Consolidation | None = field(default=None, doc="Consolidation settings.")
    limits: Limits | None = field(default=None, doc="Resource limits.")
    weight: int | None = field(
        default=None, doc="Priority among provisioners, 1-100.", minimum=1, maximum=100
    )
    cluster: ClusterSettings | None = field(
        default=None, doc="Removed after v0.3: karpy takes the cluster from its settings."
    )


@attrs.frozen(kw_only=True)
class ProvisionerStatus:
    resources: Mapping[str, Quantity] = field(
        factory=dict, doc="Summed capacity of the provisioner's nodes.", crd_default=False
    )
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class Provisioner:
    """A v0.x Provisioner, translated by karpy into an owned NodePool."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1alpha5"
    KIND: ClassVar[str] = "Provisioner"
    PLURAL: ClassVar[str] = "provisioners"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: ProvisionerSpec = field(
        factory=ProvisionerSpec, doc="Desired state.", rules=PROVISIONER_SPEC_RULES
    )
    status: ProvisionerStatus = field(
        factory=ProvisionerStatus,
        doc="Observed state, mirrored from the NodePool.",
        crd_default=False,
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="Provisioner", crd_default=False)
