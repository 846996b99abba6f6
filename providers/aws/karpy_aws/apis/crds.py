"""The EC2NodeClass CRD's declaration, found by karpy's CRD generator through the ``karpy.apis``
entry point (``aws = "karpy_aws.apis.crds:CRDS"``): karpy never imports a provider, so the
provider hands over its models and their names, columns and short names, as Karpenter's are,
and the label names karpy's own CRDs must know (`karpy_aws.apis.labels.LABELS`)."""

from __future__ import annotations

from typing import Final

from karpy.apis.conversion import ServedVersion
from karpy.apis.crds import AGE_COLUMN, READY_COLUMN, CRDInfo, column
from karpy_aws.apis import v1beta1
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.labels import LABELS
from karpy_aws.apis.v1alpha1 import AWSNodeTemplate

CRDS: Final = (
    CRDInfo(
        model=EC2NodeClass,
        singular="ec2nodeclass",
        short_names=("ec2nc", "ec2ncs"),
        columns=(READY_COLUMN, AGE_COLUMN, column("Role", ".spec.role", priority=1)),
        labels=LABELS,
        # Karpenter v0.32-v0.37's version, converted by karpy's webhook (karpy_aws.apis.v1beta1).
        served=(
            ServedVersion(
                model=v1beta1.V1Beta1EC2NodeClass,
                to_storage=v1beta1.to_v1,
                from_storage=v1beta1.from_v1,
            ),
        ),
    ),
    # Karpenter v0.x's node template, served so old manifests apply (docs/migration.md).
    CRDInfo(model=AWSNodeTemplate, singular="awsnodetemplate", columns=(READY_COLUMN, AGE_COLUMN)),
)
