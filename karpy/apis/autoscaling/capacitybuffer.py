"""CapacityBuffer (autoscaling.x-k8s.io/v1alpha1): spare room declared as pods that never run.

The API is SIG Autoscaling's, served by Cluster Autoscaler and adopted by Karpenter v1.14: a
buffer names the shape of one chunk (a PodTemplate, or the pod template of a Deployment,
ReplicaSet or StatefulSet) and how many chunks to keep room for (`replicas`, a `percentage` of
the workload's replicas, capped by `limits`). karpy's capacitybuffer controller resolves it and
writes the status as Cluster Autoscaler does; provisioning then schedules that many virtual pods
like pending ones and consolidation counts them as load. The wire shape is the upstream one, so
buffers written for Cluster Autoscaler apply unchanged; what karpy would not act on (another
provisioning strategy, a scalable kind it cannot read the template of, a percentage without a
workload) is refused here, naming the field.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar, Final

import attrs

from karpy.apis.meta import QUANTITY_PATTERN, Condition, ObjectMeta, Quantity, conditions_field
from karpy.apis.schema import Rule, field, item

GROUP: Final = "autoscaling.x-k8s.io"
API_VERSION: Final = f"{GROUP}/v1alpha1"

ACTIVE_CAPACITY: Final = "buffer.x-k8s.io/active-capacity"
"""The provisioning strategy karpy acts on (the API's default): keep the room launched."""

SCALABLE_KINDS: Final = ("Deployment", "ReplicaSet", "StatefulSet")
"""The `apps` kinds whose pod template and replicas karpy reads for a scalableRef."""

NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class ConditionType(enum.StrEnum):
    """CapacityBuffer condition types, as Cluster Autoscaler names them."""

    READY_FOR_PROVISIONING = "ReadyForProvisioning"
    PROVISIONING = "Provisioning"


class Reason(enum.StrEnum):
    """Condition reasons: Karpenter's for ReadyForProvisioning, Cluster Autoscaler's for
    Provisioning."""

    RESOLVED = "Resolved"
    POD_TEMPLATE_NOT_FOUND = "PodTemplateNotFound"
    SCALABLE_REF_NOT_FOUND = "ScalableRefNotFound"
    RESOLUTION_FAILED = "ResolutionFailed"
    FAKE_PODS_INJECTED = "FakePodsInjected"
    BUFFER_IS_EMPTY = "BufferIsEmpty"
    NOT_READY_FOR_PROVISIONING = "NotReadyForProvisioning"


@attrs.frozen(kw_only=True)
class LocalObjectRef:
    """An object in the buffer's namespace, by name."""

    name: str = field(doc="Name of the object.", min_length=1, max_length=253, pattern=NAME_PATTERN)


@attrs.frozen(kw_only=True)
class ScalableRef:
    """A workload in the buffer's namespace whose pods the buffer keeps room for."""

    __rules__ = (
        Rule(
            rule="has(self.apiGroup) && self.apiGroup == 'apps' && self.kind in "
            + "["
            + ", ".join(f"'{k}'" for k in SCALABLE_KINDS)
            + "]",
            message=(
                "karpy resolves scalableRef for apiGroup apps and kind Deployment, ReplicaSet "
                "or StatefulSet only"
            ),
        ),
    )

    api_group: str = field(
        default="",
        doc="API group of the workload: `apps` (Deployment, ReplicaSet, StatefulSet).",
        crd_default=False,
        max_length=253,
    )
    kind: str = field(doc="Kind of the workload.", min_length=1, max_length=63)
    name: str = field(
        doc="Name of the workload.", min_length=1, max_length=253, pattern=NAME_PATTERN
    )


SPEC_RULES: Final = (
    Rule(
        rule="has(self.podTemplateRef) != has(self.scalableRef)",
        message="exactly one of spec.podTemplateRef and spec.scalableRef must be set",
    ),
    Rule(
        rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
        message="spec.podTemplateRef needs spec.replicas or spec.limits",
    ),
    Rule(
        rule="!has(self.percentage) || has(self.scalableRef)",
        message="spec.percentage applies only with spec.scalableRef (a share of its replicas)",
        field_path=".percentage",
    ),
    Rule(
        rule="has(self.replicas) || has(self.percentage) || has(self.limits)",
        message="one of spec.replicas, spec.percentage or spec.limits must be set",
    ),
)


@attrs.frozen(kw_only=True)
class CapacityBufferSpec:
    __rules__ = SPEC_RULES

    provisioning_strategy: str = field(
        default=ACTIVE_CAPACITY,
        doc=(
            "How the buffer is used. karpy acts on `buffer.x-k8s.io/active-capacity` (launch "
            "nodes so the room exists) and refuses any other."
        ),
        max_length=253,
        rules=(
            Rule(
                rule=f"self == '{ACTIVE_CAPACITY}'",
                message=f"karpy provisions only the {ACTIVE_CAPACITY} strategy",
            ),
        ),
    )
    pod_template_ref: LocalObjectRef | None = field(
        default=None,
        doc=(
            "A PodTemplate in the buffer's namespace: the shape of one chunk. Exactly one of "
            "podTemplateRef and scalableRef."
        ),
    )
    scalable_ref: ScalableRef | None = field(
        default=None,
        doc=(
            "A Deployment, ReplicaSet or StatefulSet in the buffer's namespace: one chunk is "
            "one of its pods. Exactly one of podTemplateRef and scalableRef."
        ),
    )
    replicas: int | None = field(
        default=None,
        doc=("Chunks to keep room for. With percentage, the larger of the two; limits cap either."),
        minimum=0,
        maximum=2147483647,
    )
    percentage: int | None = field(
        default=None,
        doc=(
            "Chunks as a percentage of the scalableRef's replicas, rounded up (at least 1 "
            "while the workload has replicas)."
        ),
        minimum=0,
        maximum=2147483647,
    )
    limits: Mapping[str, Quantity] | None = field(
        default=None,
        doc=(
            "A cap on the buffer's summed requests: no more chunks than fit. Alone, as many "
            "chunks as fit. Each resource must be one the chunk requests."
        ),
        max_properties=64,
        values=item(pattern=QUANTITY_PATTERN),
    )


@attrs.frozen(kw_only=True)
class CapacityBufferStatus:
    pod_template_ref: LocalObjectRef | None = field(
        default=None,
        doc="The PodTemplate the buffer's chunks are made from (unset for a scalableRef).",
    )
    replicas: int | None = field(
        default=None, doc="Chunks the buffer holds room for now.", minimum=0
    )
    pod_template_generation: int | None = field(
        default=None, doc="metadata.generation of the PodTemplate the status was computed from."
    )
    conditions: tuple[Condition, ...] = conditions_field()
    provisioning_strategy: str | None = field(
        default=None, doc="The strategy the buffer is provisioned with."
    )


@attrs.frozen(kw_only=True)
class CapacityBuffer:
    """Spare capacity, held as pods that are scheduled but never created."""

    GROUP: ClassVar[str] = GROUP
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "CapacityBuffer"
    PLURAL: ClassVar[str] = "capacitybuffers"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: CapacityBufferSpec = field(doc="The room to keep and the shape of one chunk.")
    status: CapacityBufferStatus = field(
        factory=CapacityBufferStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="CapacityBuffer", crd_default=False)
