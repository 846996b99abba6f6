"""AWSNodeTemplate (karpenter.k8s.aws/v1alpha1): the node template of Karpenter v0.x.

Served so that v0.x manifests apply as written; karpy's legacy controller turns each one into an
owned EC2NodeClass (`karpy_aws.apis.legacy`). The spec is the inline provider's shape, declared
in `karpy.apis.v1alpha5.awsprovider` because v1alpha5 embedded it in the core Provisioner.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from typing import ClassVar

import attrs

from karpy.apis.meta import Condition, ObjectMeta, conditions_field
from karpy.apis.schema import field
from karpy.apis.v1alpha5.awsprovider import AWSNodeTemplateSpec
from karpy_aws.apis import labels as awslabels

API_VERSION = f"{awslabels.AWS_GROUP}/v1alpha1"


@attrs.frozen(kw_only=True)
class AWSNodeTemplateStatus:
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class AWSNodeTemplate:
    """A v0.x node template, translated by karpy into an owned EC2NodeClass."""

    GROUP: ClassVar[str] = awslabels.AWS_GROUP
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "AWSNodeTemplate"
    PLURAL: ClassVar[str] = "awsnodetemplates"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: AWSNodeTemplateSpec = field(factory=AWSNodeTemplateSpec, doc="Launch settings.")
    status: AWSNodeTemplateStatus = field(
        factory=AWSNodeTemplateStatus,
        doc="Observed state, mirrored from the EC2NodeClass.",
        crd_default=False,
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="AWSNodeTemplate", crd_default=False)
