"""EC2NodeClass (karpenter.k8s.aws/v1): how the AWS provider launches an instance.

Selector terms discover subnets, security groups, AMIs and capacity reservations; the rest
shapes the launch template (block devices, IMDS, kubelet, user data, tags). The schema and
CEL rules follow Karpenter's AWS provider so its manifests apply unchanged.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.schema import Rule, field, item
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass_network import (
    ConnectionTracking,
    CPUOptions,
    NetworkInterface,
    PlacementGroupSelector,
)
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus
from karpy_aws.apis.kubelet import KubeletConfiguration

API_VERSION = f"{awslabels.AWS_GROUP}/v1"


class AMIFamily(enum.StrEnum):
    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"


ALIAS_FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")
WINDOWS_ALIAS_FAMILIES = ("windows2019", "windows2022", "windows2025")
WINDOWS_FAMILIES = (AMIFamily.WINDOWS2019, AMIFamily.WINDOWS2022, AMIFamily.WINDOWS2025)
WINDOWS_REFUSED = (
    "karpy does not launch Windows nodes (it writes no Windows user data and offers no "
    "kubernetes.io/os=windows capacity); use al2023, al2 or bottlerocket"
)
"""Why a Windows alias or amiFamily is refused at admission, rather than admitted to fail at
launch (docs/providers/aws.md#windows)."""


# Fields of Karpenter's EC2NodeClass that karpy accepts in its schema but does not act on yet:
# the apiserver refuses a manifest that sets one (a rule naming the field), and the NodeClass
# status check repeats the refusal for objects that bypassed it, rather than launching nodes
# without what was asked. A field leaves this table when its launch code lands.
NOT_YET_SUPPORTED: Mapping[str, str] = {}


def not_yet_supported_message(name: str) -> str:
    """The refusal for the field ``name`` of NOT_YET_SUPPORTED (the apiserver puts the field's
    path in front of it; karpy's own check does the same)."""
    return (
        f"karpy does not support {NOT_YET_SUPPORTED[name]} yet; remove {name} rather than "
        "get nodes launched without it"
    )


def _not_yet(name: str, *, is_list: bool = False) -> tuple[Rule, ...]:
    if name not in NOT_YET_SUPPORTED:
        return ()
    return (
        Rule(
            rule="self.size() == 0" if is_list else "false",
            message=not_yet_supported_message(name),
            reason="FieldValueForbidden",
        ),
    )


def _term_tags(doc: str) -> Mapping[str, str]:
    result: Mapping[str, str] = field(
        factory=dict,
        crd_default=False,
        doc=doc,
        max_properties=20,
        values=item(max_length=256),
        rules=(
            Rule(
                rule="self.all(k, k != '' && self[k] != '')",
                message="empty tag keys or values aren't supported",
            ),
        ),
    )
    return result


def _exclusive(name: str, others: tuple[str, ...], where: str) -> Rule:
    other_set = " || ".join(f"has(self.{o})" for o in others)
    return Rule(
        rule=f"!has(self.{name}) || !({other_set})",
        message=(
            f"'{name}' is mutually exclusive, cannot be set with a combination of other fields "
            f"in {where}[]"
        ),
    )


def _at_least_one(fields: tuple[str, ...]) -> Rule:
    listed = ", ".join(f"'{f}'" for f in fields)
    return Rule(
        rule=" || ".join(f"has(self.{f})" for f in fields),
        message=f"expected at least one, got none, [{listed}]",
    )


@attrs.frozen(kw_only=True)
class SubnetSelectorTerm:
    __rules__ = (
        _at_least_one(("tags", "id")),
        _exclusive("id", ("tags",), "subnetSelectorTerms"),
    )

    tags: Mapping[str, str] = _term_tags("Subnet tags to match; '*' matches any value.")
    id: str | None = field(
        default=None, doc="Subnet id.", pattern=r"^subnet-[0-9a-z]+$", max_length=64
    )


@attrs.frozen(kw_only=True)
class SecurityGroupSelectorTerm:
    __rules__ = (
        _at_least_one(("tags", "id", "name")),
        _exclusive("id", ("tags", "name"), "securityGroupSelectorTerms"),
        _exclusive("name", ("tags", "id"), "securityGroupSelectorTerms"),
    )

    tags: Mapping[str, str] = _term_tags("Security group tags to match.")
    id: str | None = field(
        default=None, doc="Security group id.", pattern=r"^sg-[0-9a-z]+$", max_length=64
    )
    name: str | None = field(default=None, doc="Security group name.", max_length=255)


class InstanceMatchCriteria(enum.StrEnum):
    OPEN = "open"
    TARGETED = "targeted"


@attrs.frozen(kw_only=True)
class CapacityReservationSelectorTerm:
    __rules__ = (
        _at_least_one(("tags", "id", "instanceMatchCriteria")),
        _exclusive(
            "id", ("tags", "ownerID", "instanceMatchCriteria"), "capacityReservationSelectorTerms"
        ),
        Rule(
            rule="!has(self.ownerID) || has(self.tags)",
            message="'ownerID' must be used with 'tags'",
            field_path=".ownerID",
        ),
    )

    tags: Mapping[str, str] = _term_tags("Capacity reservation tags to match.")
    id: str | None = field(
        default=None, doc="Capacity reservation id.", pattern=r"^cr-[0-9a-z]+$", max_length=64
    )
    owner_id: str | None = field(
        default=None, wire="ownerID", doc="Owning AWS account id.", pattern=r"^[0-9]{12}$"
    )
    instance_match_criteria: InstanceMatchCriteria | None = field(
        default=None, doc="Select reservations by match criteria (open or targeted)."
    )


_ALIAS_RULES = (
    Rule(
        rule="self.matches(r'^[a-zA-Z0-9]+@.+$')",
        message="'alias' is improperly formatted, must match the format 'family@version'",
    ),
    Rule(
        rule=f"self.split('@')[0] in [{', '.join(repr(f) for f in ALIAS_FAMILIES)}]",
        message=(
            "family is not supported, must be one of the following: "
            + ", ".join(f"'{f}'" for f in ALIAS_FAMILIES)
        ),
    ),
    Rule(
        rule=(
            "(self.contains('@') && "
            f"self.split('@')[0] in [{', '.join(repr(f) for f in WINDOWS_ALIAS_FAMILIES)}]) ? "
            "self.split('@')[1] == 'latest' : true"
        ),
        message="windows families may only specify version 'latest'",
    ),
    Rule(
        rule=(f"!(self.split('@')[0] in [{', '.join(repr(f) for f in WINDOWS_ALIAS_FAMILIES)}])"),
        message=WINDOWS_REFUSED,
    ),
)


@attrs.frozen(kw_only=True)
class AMISelectorTerm:
    __rules__ = (
        _at_least_one(("tags", "id", "name", "alias", "ssmParameter")),
        _exclusive("alias", ("tags", "id", "name", "owner", "ssmParameter"), "amiSelectorTerms"),
        _exclusive("id", ("tags", "name", "owner", "alias", "ssmParameter"), "amiSelectorTerms"),
        _exclusive("ssmParameter", ("tags", "id", "name", "owner", "alias"), "amiSelectorTerms"),
    )

    alias: str | None = field(
        default=None,
        doc=(
            "family@version (al2, al2023, bottlerocket; windows2019/2022/2025 are refused: "
            "karpy launches no Windows nodes); must be the only term."
        ),
        max_length=30,
        rules=_ALIAS_RULES,
    )
    tags: Mapping[str, str] = _term_tags("AMI tags to match.")
    id: str | None = field(default=None, doc="AMI id.", pattern=r"^ami-[0-9a-z]+$", max_length=64)
    name: str | None = field(default=None, doc="AMI name (wildcards allowed).", max_length=256)
    owner: str | None = field(
        default=None, doc="AMI owner: account id or alias (self, amazon).", max_length=64
    )
    ssm_parameter: str | None = field(
        default=None, doc="SSM parameter that holds an AMI id.", max_length=2048
    )


class VolumeType(enum.StrEnum):
    STANDARD = "standard"
    IO1 = "io1"
    IO2 = "io2"
    GP2 = "gp2"
    SC1 = "sc1"
    ST1 = "st1"
    GP3 = "gp3"


VOLUME_SIZE_PATTERN = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|"
    r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|"
    r"([1-9]|[1-5][0-7]|58)Ti|([1-9]|[1-5][0-9]|6[0-3]|64)T)$"
)


@attrs.frozen(kw_only=True)
class BlockDevice:
    __rules__ = (
        Rule(
            rule="has(self.snapshotID) || has(self.volumeSize)",
            message="snapshotID or volumeSize must be defined",
        ),
    )

    delete_on_termination: bool | None = field(default=None, doc="Delete with the instance.")
    encrypted: bool | None = field(default=None, doc="Encrypt the volume.")
    iops: int | None = field(default=None, doc="Provisioned IOPS (io1, io2, gp3).", minimum=0)
    kms_key_id: str | None = field(default=None, wire="kmsKeyID", doc="KMS key for encryption.")
    snapshot_id: str | None = field(
        default=None, wire="snapshotID", doc="Snapshot to create the volume from."
    )
    throughput: int | None = field(default=None, doc="Throughput in MiB/s (gp3).", minimum=0)
    volume_initialization_rate: int | None = field(
        default=None,
        doc="Snapshot initialization rate in MiB/s.",
        minimum=100,
        maximum=300,
        rules=_not_yet("volumeInitializationRate"),
    )
    volume_size: Quantity | None = field(
        default=None, doc="Volume size, e.g. 20Gi (up to 64T).", pattern=VOLUME_SIZE_PATTERN
    )
    volume_type: VolumeType | None = field(default=None, doc="EBS volume type.")


@attrs.frozen(kw_only=True)
class BlockDeviceMapping:
    device_name: str | None = field(default=None, doc="Device name, e.g. /dev/xvda.", max_length=64)
    ebs: BlockDevice | None = field(default=None, doc="EBS volume settings.")
    root_volume: bool | None = field(default=None, doc="This device is the root volume.")


class InstanceStorePolicy(enum.StrEnum):
    RAID0 = "RAID0"


@attrs.frozen(kw_only=True)
class MetadataOptions:
    """IMDS settings written into the launch template."""

    http_endpoint: str = field(
        default="enabled", doc="IMDS endpoint on or off.", enum=("enabled", "disabled")
    )
    http_protocol_ipv6: str = field(
        default="disabled",
        wire="httpProtocolIPv6",
        doc="IMDS IPv6 endpoint.",
        enum=("enabled", "disabled"),
    )
    http_put_response_hop_limit: int = field(
        default=1, doc="Hop limit for IMDS responses.", minimum=1, maximum=64
    )
    http_tokens: str = field(
        default="required", doc="IMDSv2 token requirement.", enum=("required", "optional")
    )


_RESTRICTED_TAGS = (
    (awslabels.TAG_EKS_CLUSTER_NAME, f"k == '{awslabels.TAG_EKS_CLUSTER_NAME}'"),
    (awslabels.TAG_CLUSTER_PREFIX, f"k.startsWith('{awslabels.TAG_CLUSTER_PREFIX.rstrip('/')}')"),
    (awslabels.TAG_NODEPOOL, f"k == '{awslabels.TAG_NODEPOOL}'"),
    (awslabels.TAG_NODECLAIM, f"k == '{awslabels.TAG_NODECLAIM}'"),
    (awslabels.TAG_EC2NODECLASS, f"k == '{awslabels.TAG_EC2NODECLASS}'"),
)

SPEC_RULES = (
    Rule(
        rule="has(self.role) != has(self.instanceProfile)",
        message="must specify exactly one of ['role', 'instanceProfile']",
    ),
    Rule(
        rule=(
            "(has(oldSelf.role) && has(self.role)) || "
            "(has(oldSelf.instanceProfile) && has(self.instanceProfile))"
        ),
        message=(
            "changing from 'instanceProfile' to 'role' is not supported. You must delete and "
            "recreate this node class if you want to change this."
        ),
        reason="FieldValueForbidden",
    ),
    Rule(
        rule="self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)",
        message="must specify amiFamily if amiSelectorTerms does not contain an alias",
        reason="FieldValueRequired",
        field_path=".amiFamily",
    ),
)


def _terms_nonempty(name: str) -> tuple[Rule, ...]:
    return (Rule(rule="self.size() != 0", message=f"{name} cannot be empty"),)


@attrs.frozen(kw_only=True)
class EC2NodeClassSpec:
    subnet_selector_terms: tuple[SubnetSelectorTerm, ...] = field(
        doc="Subnets to launch into; terms are ORed, fields within a term ANDed.",
        max_items=30,
        rules=_terms_nonempty("subnetSelectorTerms"),
    )
    security_group_selector_terms: tuple[SecurityGroupSelectorTerm, ...] = field(
        doc="Security groups attached to nodes.",
        max_items=30,
        rules=_terms_nonempty("securityGroupSelectorTerms"),
    )
    ami_selector_terms: tuple[AMISelectorTerm, ...] = field(
        doc="AMI discovery: an alias term alone, or id/name/tags/ssmParameter terms.",
        min_items=1,
        max_items=30,
        rules=(
            *_terms_nonempty("amiSelectorTerms"),
            Rule(
                rule="!(self.exists(x, has(x.alias)) && self.size() != 1)",
                message="'alias' is mutually exclusive, cannot be set with a combination of "
                "other amiSelectorTerms",
            ),
        ),
    )
    capacity_reservation_selector_terms: tuple[CapacityReservationSelectorTerm, ...] = field(
        factory=tuple,
        doc=(
            "On-demand capacity reservations and capacity blocks to use: their types are "
            "offered as karpenter.sh/capacity-type=reserved while they have room."
        ),
        crd_default=False,
        max_items=30,
        rules=_not_yet("capacityReservationSelectorTerms", is_list=True),
    )
    ami_family: AMIFamily | None = field(
        default=None,
        doc=(
            "User-data format and default block devices; inferred from an alias. The Windows "
            "families are refused: karpy launches no Windows nodes."
        ),
        rules=(
            Rule(
                rule=f"!(self in [{', '.join(repr(str(f)) for f in WINDOWS_FAMILIES)}])",
                message=WINDOWS_REFUSED,
            ),
        ),
    )
    user_data: str | None = field(default=None, doc="Custom user data merged with karpy's.")
    role: str | None = field(
        default=None,
        doc="IAM role; karpy manages an instance profile for it.",
        max_length=2048,
        rules=(Rule(rule="self != ''", message="role cannot be empty"),),
    )
    instance_profile: str | None = field(
        default=None,
        doc="An instance profile you manage (instead of role).",
        max_length=128,
        rules=(Rule(rule="self != ''", message="instanceProfile cannot be empty"),),
    )
    tags: Mapping[str, str] = field(
        factory=dict,
        doc="Extra tags on instances, volumes, launch templates and fleets.",
        crd_default=False,
        max_properties=50,
        values=item(max_length=256),
        rules=(
            Rule(rule="self.all(k, k != '')", message="empty tag keys aren't supported"),
            *(
                Rule(
                    rule=f"self.all(k, !({cond}))",
                    message=f"tag contains a restricted tag matching {name}",
                )
                for name, cond in _RESTRICTED_TAGS
            ),
        ),
    )
    kubelet: KubeletConfiguration | None = field(default=None, doc="Kubelet settings.")
    block_device_mappings: tuple[BlockDeviceMapping, ...] = field(
        factory=tuple,
        doc="EBS volumes; defaults depend on the AMI family.",
        crd_default=False,
        max_items=50,
        rules=(
            Rule(
                rule="self.filter(x, has(x.rootVolume) && x.rootVolume).size() <= 1",
                message="must have only one blockDeviceMappings with rootVolume",
            ),
        ),
    )
    instance_store_policy: InstanceStorePolicy | None = field(
        default=None,
        doc="RAID0 puts local NVMe into one array for ephemeral storage.",
        rules=_not_yet("instanceStorePolicy"),
    )
    metadata_options: MetadataOptions = field(
        factory=MetadataOptions, doc="IMDS settings written into the launch template."
    )
    detailed_monitoring: bool | None = field(default=None, doc="Detailed CloudWatch monitoring.")
    associate_public_ip_address: bool | None = field(
        default=None,
        wire="associatePublicIPAddress",
        doc="Public IP on the primary interface; unset lets the subnet decide.",
    )
    context: str | None = field(
        default=None,
        doc="CreateFleet context.",
        max_length=256,
        rules=_not_yet("context"),
    )
    placement_group_selector: PlacementGroupSelector | None = field(
        default=None,
        doc="The placement group every instance of this class joins.",
        rules=_not_yet("placementGroupSelector"),
    )
    network_interfaces: tuple[NetworkInterface, ...] = field(
        factory=tuple,
        doc="Network interfaces to attach (EFA-only cards for accelerated instances).",
        crd_default=False,
        max_items=32,
        rules=_not_yet("networkInterfaces", is_list=True),
    )
    ip_prefix_count: int | None = field(
        default=None,
        doc="IPv4 prefixes to assign to the primary interface.",
        minimum=0,
        rules=_not_yet("ipPrefixCount"),
    )
    connection_tracking: ConnectionTracking | None = field(
        default=None,
        doc="Connection-tracking idle timeouts.",
        rules=_not_yet("connectionTracking"),
    )
    cpu_options: CPUOptions | None = field(
        default=None, doc="CPU options of the instance.", rules=_not_yet("cpuOptions")
    )


def not_yet_supported(spec: EC2NodeClassSpec) -> tuple[str, ...]:
    """The refusal of every NOT_YET_SUPPORTED field ``spec`` sets, in spec order (the same
    messages the CRD's rules give)."""
    present = {
        "capacityReservationSelectorTerms": bool(spec.capacity_reservation_selector_terms),
        "instanceStorePolicy": spec.instance_store_policy is not None,
        "context": spec.context is not None,
        "placementGroupSelector": spec.placement_group_selector is not None,
        "networkInterfaces": bool(spec.network_interfaces),
        "ipPrefixCount": spec.ip_prefix_count is not None,
        "connectionTracking": spec.connection_tracking is not None,
        "cpuOptions": spec.cpu_options is not None,
    }
    out = [
        f"spec.{name}: {not_yet_supported_message(name)}"
        for name, set_ in present.items()
        if set_ and name in NOT_YET_SUPPORTED
    ]
    if "volumeInitializationRate" in NOT_YET_SUPPORTED:
        out.extend(
            f"spec.blockDeviceMappings[{i}].ebs.volumeInitializationRate: "
            + not_yet_supported_message("volumeInitializationRate")
            for i, m in enumerate(spec.block_device_mappings)
            if m.ebs is not None and m.ebs.volume_initialization_rate is not None
        )
    return tuple(out)


@attrs.frozen(kw_only=True)
class EC2NodeClass:
    """AWS launch configuration referenced by NodePools."""

    GROUP: ClassVar[str] = awslabels.AWS_GROUP
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "EC2NodeClass"
    PLURAL: ClassVar[str] = "ec2nodeclasses"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: EC2NodeClassSpec = field(doc="Desired launch configuration.", rules=SPEC_RULES)
    status: EC2NodeClassStatus = field(
        factory=EC2NodeClassStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="EC2NodeClass", crd_default=False)
