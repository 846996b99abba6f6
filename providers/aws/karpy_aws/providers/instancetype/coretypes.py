"""Convert karpy_aws instance types into the scheduling core's InstanceType values.

The core schedules with provider-neutral values (requirements as label sets, resources in
milli-units); karpy_aws derives richer values of its own (labels, overhead parts, zone ids).
This is the one place the two meet, so unit conversions (base units -> milli-units) and the
zone-id requirement are done once. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.requirements import Requirement
from karpy.core.resources import Resources
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.instancetype.instancetypes import CPU
from karpy_aws.providers.instancetype.offerings import AWSInstanceType

# Labels a type either has or lacks. A type that lacks one says so (DoesNotExist), as Karpenter's
# instance types do, so that "instance-gpu-count Exists" or "local-nvme Gt 0" rules it out
# instead of passing as an undefined well-known label.
ABSENT_WHEN_UNSET: Final = (
    awslabels.LABEL_AWS_INSTANCE_GPU_NAME,
    awslabels.LABEL_AWS_INSTANCE_GPU_MANUFACTURER,
    awslabels.LABEL_AWS_INSTANCE_GPU_COUNT,
    awslabels.LABEL_AWS_INSTANCE_GPU_MEMORY,
    awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_NAME,
    awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_MANUFACTURER,
    awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_COUNT,
    awslabels.LABEL_AWS_INSTANCE_LOCAL_NVME,
)


def to_resources(values: Mapping[str, int]) -> Resources:
    """karpy_aws's amounts (cpu in millicores, everything else in base units: bytes, counts) as
    core Resources (milli-units throughout)."""
    return Resources.milli({k: v if k == CPU else v * 1000 for k, v in values.items()})


def to_core_instance_type(instance_type: AWSInstanceType) -> InstanceType:
    """The core's view of ``instance_type``: labels as requirements (accelerator and local-NVMe
    labels it lacks as DoesNotExist), every offering (available or not), capacity and overhead
    in milli-units, and the zone ids of available offerings."""
    available_zone_ids = frozenset(o.zone_id for o in instance_type.offerings if o.available)
    labels = {k: v for k, v in instance_type.labels.items() if k != wk.LABEL_INSTANCE_TYPE}
    return InstanceType.make(
        instance_type.name,
        to_resources(instance_type.capacity),
        (Offering(o.zone, o.capacity_type, o.price, o.available) for o in instance_type.offerings),
        overhead=to_resources(instance_type.overhead.total()),
        labels=labels,
        extra=(
            Requirement(awslabels.LABEL_AWS_ZONE_ID, False, available_zone_ids),
            *(Requirement(k, False) for k in ABSENT_WHEN_UNSET if k not in labels),
        ),
    )
