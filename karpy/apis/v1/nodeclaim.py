"""NodeClaim (karpenter.sh/v1): one requested machine, from launch to termination.

The provisioner creates NodeClaims from a NodePool template narrowed by pods' needs; the
lifecycle controller launches, registers and initializes them. The spec is immutable once
created (the apiserver enforces it), so drift is detected by comparison, never by update.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import (
    DURATION_PATTERN,
    NILLABLE_DURATION_PATTERN,
    QUANTITY_PATTERN,
    Condition,
    ObjectMeta,
    Quantity,
    conditions_field,
)
from karpy.apis.schema import Rule, field, item
from karpy.apis.v1 import labels
from karpy.apis.v1.common import NodeClaimRequirement, NodeClassReference
from karpy.apis.v1.nodepool import EXPIRE_AFTER_DOC, STARTUP_TAINTS_DOC, TAINTS_DOC, TGP_DOC

API_VERSION = f"{labels.GROUP}/v1"


class ConditionType(enum.StrEnum):
    """NodeClaim condition types, as Karpenter names them."""

    LAUNCHED = "Launched"
    REGISTERED = "Registered"
    INITIALIZED = "Initialized"
    READY = "Ready"
    CONSOLIDATABLE = "Consolidatable"
    DRIFTED = "Drifted"
    DISRUPTION_REASON = "DisruptionReason"
    DRAINED = "Drained"
    VOLUMES_DETACHED = "VolumesDetached"
    INSTANCE_TERMINATING = "InstanceTerminating"
    CONSISTENT_STATE_FOUND = "ConsistentStateFound"


@attrs.frozen(kw_only=True)
class ResourceRequests:
    requests: Mapping[str, Quantity] = field(
        factory=dict,
        doc="Summed requests of the pods packed onto the node, plus DaemonSet overhead.",
        crd_default=False,
        max_properties=64,
        values=item(pattern=QUANTITY_PATTERN),
    )


@attrs.frozen(kw_only=True)
class NodeClaimSpec:
    requirements: tuple[NodeClaimRequirement, ...] = field(
        doc="Requirements the launched instance must satisfy.", max_items=100
    )
    node_class_ref: NodeClassReference = field(
        wire="nodeClassRef", doc="The provider NodeClass the instance is launched with."
    )
    resources: ResourceRequests = field(
        factory=ResourceRequests, doc="Resources the node must provide.", crd_default=False
    )
    taints: tuple[Taint, ...] = field(
        factory=tuple, doc=TAINTS_DOC, crd_default=False, max_items=100
    )
    startup_taints: tuple[Taint, ...] = field(
        factory=tuple, doc=STARTUP_TAINTS_DOC, crd_default=False, max_items=100
    )
    expire_after: str = field(
        default="720h", doc=EXPIRE_AFTER_DOC, pattern=NILLABLE_DURATION_PATTERN, max_length=64
    )
    termination_grace_period: str | None = field(
        default=None, doc=TGP_DOC, pattern=DURATION_PATTERN, max_length=64
    )


@attrs.frozen(kw_only=True)
class NodeClaimStatus:
    node_name: str | None = field(default=None, doc="Name of the Node that registered.")
    provider_id: str | None = field(
        default=None, wire="providerID", doc="Cloud instance id, e.g. aws:///us-west-2a/i-0123."
    )
    image_id: str | None = field(default=None, wire="imageID", doc="Image the node boots.")
    capacity: Mapping[str, Quantity] = field(
        factory=dict, doc="Estimated capacity of the instance.", crd_default=False
    )
    allocatable: Mapping[str, Quantity] = field(
        factory=dict, doc="Estimated allocatable resources.", crd_default=False
    )
    last_pod_event_time: datetime | None = field(
        default=None,
        doc="Last time a pod was bound to or removed from the node; drives consolidateAfter.",
        format="date-time",
    )
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class NodeClaim:
    """One requested machine."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "NodeClaim"
    PLURAL: ClassVar[str] = "nodeclaims"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodeClaimSpec = field(
        doc="Desired machine; immutable once created.",
        rules=(
            Rule(rule="self == oldSelf", message="spec is immutable", reason="FieldValueForbidden"),
        ),
    )
    status: NodeClaimStatus = field(
        factory=NodeClaimStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="NodeClaim", crd_default=False)
