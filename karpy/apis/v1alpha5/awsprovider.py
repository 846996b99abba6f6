"""The AWS settings of Karpenter v0.x: a Provisioner's inline `spec.provider`, and the spec of an
AWSNodeTemplate (karpenter.k8s.aws/v1alpha1, declared by the AWS provider, which adds userData,
amiSelector and detailedMonitoring to this shape).

v1alpha5 embedded this AWS shape in the core Provisioner, so the Provisioner's schema needs it
here; the AWS provider turns it into an EC2NodeClass. Selectors are the old maps with magic keys
(`aws-ids`, `aws::name`, ...), which v1 replaced with selector-term lists.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping

import attrs

from karpy.apis.meta import QUANTITY_PATTERN, Quantity
from karpy.apis.schema import field, item

AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Ubuntu", "Windows2019", "Windows2022", "Custom")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")


@attrs.frozen(kw_only=True)
class LegacyBlockDevice:
    delete_on_termination: bool | None = field(default=None, doc="Delete with the instance.")
    encrypted: bool | None = field(default=None, doc="Encrypt the volume.")
    iops: int | None = field(default=None, doc="Provisioned IOPS.", minimum=0)
    kms_key_id: str | None = field(default=None, wire="kmsKeyID", doc="KMS key for encryption.")
    snapshot_id: str | None = field(default=None, wire="snapshotID", doc="Source snapshot.")
    throughput: int | None = field(default=None, doc="Throughput in MiB/s (gp3).", minimum=0)
    volume_size: Quantity | None = field(
        default=None, doc="Volume size, e.g. 20Gi.", pattern=QUANTITY_PATTERN
    )
    volume_type: str | None = field(default=None, doc="EBS volume type.", enum=VOLUME_TYPES)


@attrs.frozen(kw_only=True)
class LegacyBlockDeviceMapping:
    device_name: str | None = field(default=None, doc="Device name, e.g. /dev/xvda.")
    ebs: LegacyBlockDevice | None = field(default=None, doc="EBS volume settings.")


@attrs.frozen(kw_only=True)
class LegacyMetadataOptions:
    """IMDS settings; v0.x defaulted the hop limit to 2 (v1: 1)."""

    http_endpoint: str | None = field(
        default=None, doc="IMDS endpoint on or off.", enum=("enabled", "disabled")
    )
    http_protocol_ipv6: str | None = field(
        default=None, wire="httpProtocolIPv6", doc="IMDS IPv6.", enum=("enabled", "disabled")
    )
    http_put_response_hop_limit: int | None = field(
        default=None, doc="IMDS hop limit.", minimum=1, maximum=64
    )
    http_tokens: str | None = field(
        default=None, doc="IMDSv2 requirement.", enum=("required", "optional")
    )


@attrs.frozen(kw_only=True)
class AWSSettings:
    """AWS launch settings shared by the inline provider and the AWSNodeTemplate spec."""

    instance_profile: str | None = field(
        default=None, doc="IAM instance profile of the nodes (v1: spec.instanceProfile)."
    )
    subnet_selector: Mapping[str, str] = field(
        factory=dict,
        doc="Subnet tags to match, or aws-ids (comma-separated ids).",
        crd_default=False,
    )
    security_group_selector: Mapping[str, str] = field(
        factory=dict,
        doc="Security group tags to match, or aws-ids / aws::name.",
        crd_default=False,
    )
    ami_family: str | None = field(
        default=None, doc="AMI family; AL2 when unset.", enum=AMI_FAMILIES
    )
    launch_template: str | None = field(
        default=None,
        doc="A user-managed launch template name; v1 has none, so it is refused at translation.",
    )
    context: str | None = field(default=None, doc="CreateFleet context.")
    tags: Mapping[str, str] = field(
        factory=dict, doc="Tags added to the EC2 resources.", crd_default=False
    )
    metadata_options: LegacyMetadataOptions | None = field(default=None, doc="IMDS settings.")
    block_device_mappings: tuple[LegacyBlockDeviceMapping, ...] = field(
        factory=tuple, doc="Volumes of the instance.", crd_default=False
    )


@attrs.frozen(kw_only=True)
class AWSProvider(AWSSettings):
    """A Provisioner's inline `spec.provider` (AWS)."""

    api_version: str | None = field(
        default=None,
        doc="Inline provider api version (extensions.karpenter.sh/v1alpha1).",
        enum=("extensions.karpenter.sh/v1alpha1",),
    )
    kind: str | None = field(default=None, doc="Inline provider kind.", enum=("AWS",))


@attrs.frozen(kw_only=True)
class AWSNodeTemplateSpec(AWSSettings):
    """An AWSNodeTemplate's spec: the inline provider's settings plus three of its own."""

    user_data: str | None = field(default=None, doc="User data merged with karpy's.")
    ami_selector: Mapping[str, str] = field(
        factory=dict,
        doc="AMI tags to match, or aws-ids / aws::name / aws::owners.",
        crd_default=False,
        values=item(max_length=256),
    )
    detailed_monitoring: bool | None = field(default=None, doc="Detailed CloudWatch monitoring.")
