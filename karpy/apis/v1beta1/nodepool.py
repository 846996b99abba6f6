"""NodePool and NodeClaim (karpenter.sh/v1beta1): the API of Karpenter v0.32-v0.37.

The same kinds as v1, so the same CRDs serve them as a second version; v1 is stored and karpy
reads v1 only. The apiserver converts through karpy's conversion webhook
(`karpy.apis.v1beta1.convert` does the mapping), so a v1beta1 manifest applies as written and
reads back as v1, and a v1 object reads back through v1beta1 without losing a field.

Where v1 added a field v1beta1 never had (terminationGracePeriod, budget reasons, a
consolidateAfter beside WhenUnderutilized, the Balanced policy, Gte/Lte) the v1beta1 schema
carries it too, so a v1 object round-trips through v1beta1 unchanged. The one v1beta1 field v1
moved to another object, `kubelet`, is refused at admission naming the field: a conversion
sees one object and cannot write the NodeClass.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar, Final

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import (
    DURATION_PATTERN,
    NILLABLE_DURATION_PATTERN,
    QUANTITY_PATTERN,
    ObjectMeta,
    Quantity,
)
from karpy.apis.schema import Rule, field, item
from karpy.apis.v1 import labels
from karpy.apis.v1.common import NodeClaimRequirement, NodeSelectorRequirementWithMinValues
from karpy.apis.v1.nodeclaim import NodeClaimStatus, ResourceRequests
from karpy.apis.v1.nodepool import (
    EXPIRE_AFTER_DOC,
    STARTUP_TAINTS_DOC,
    TAINTS_DOC,
    TGP_DOC,
    Budget,
    NodeClaimTemplateMetadata,
    NodePoolStatus,
)
from karpy.apis.v1alpha5.provisioner import KubeletConfiguration

API_VERSION: Final = f"{labels.GROUP}/v1beta1"

KUBELET_MESSAGE: Final = (
    "kubelet moved to the NodeClass in karpenter.sh/v1: set it as EC2NodeClass.spec.kubelet "
    "(`karpy convert` moves it for you)"
)


class ConsolidationPolicy(enum.StrEnum):
    WHEN_EMPTY = "WhenEmpty"
    WHEN_UNDERUTILIZED = "WhenUnderutilized"
    BALANCED = "Balanced"


@attrs.frozen(kw_only=True)
class NodeClassReference:
    """v1beta1's reference: apiVersion instead of group; kind and apiVersion may be left out,
    meaning the provider's NodeClass."""

    name: str = field(
        doc="Name of the NodeClass.",
        max_length=253,
        rules=(Rule(rule="self != ''", message="name may not be empty"),),
    )
    kind: str | None = field(
        default=None, doc="Kind of the NodeClass; the provider's when unset.", max_length=63
    )
    api_version: str | None = field(
        default=None,
        doc="API version of the NodeClass (karpenter.k8s.aws/v1beta1); the provider's when unset.",
        max_length=253,
    )


def _kubelet() -> KubeletConfiguration | None:
    result: KubeletConfiguration | None = field(
        default=None,
        doc="Refused: kubelet settings live on the NodeClass in v1 (EC2NodeClass.spec.kubelet).",
        rules=(Rule(rule="false", message=KUBELET_MESSAGE, reason="FieldValueForbidden"),),
    )
    return result


@attrs.frozen(kw_only=True)
class NodeClaimTemplateSpec:
    requirements: tuple[NodeSelectorRequirementWithMinValues, ...] = field(
        doc="Node selector requirements limiting instance types, zones, capacity types and more.",
        max_items=100,
    )
    node_class_ref: NodeClassReference = field(
        wire="nodeClassRef", doc="The provider NodeClass (v1: nodeClassRef {group, kind, name})."
    )
    taints: tuple[Taint, ...] = field(
        factory=tuple, doc=TAINTS_DOC, crd_default=False, max_items=100
    )
    startup_taints: tuple[Taint, ...] = field(
        factory=tuple, doc=STARTUP_TAINTS_DOC, crd_default=False, max_items=100
    )
    kubelet: KubeletConfiguration | None = _kubelet()
    termination_grace_period: str | None = field(
        default=None, doc=TGP_DOC + " (v1 field)", pattern=DURATION_PATTERN, max_length=64
    )


@attrs.frozen(kw_only=True)
class NodeClaimTemplate:
    spec: NodeClaimTemplateSpec = field(doc="Spec of the NodeClaims this pool creates.")
    metadata: NodeClaimTemplateMetadata = field(
        factory=NodeClaimTemplateMetadata,
        doc="Labels and annotations of the NodeClaims and Nodes.",
        crd_default=False,
    )


@attrs.frozen(kw_only=True)
class Disruption:
    consolidation_policy: ConsolidationPolicy = field(
        default=ConsolidationPolicy.WHEN_UNDERUTILIZED,
        doc="WhenEmpty or WhenUnderutilized (v1: WhenEmptyOrUnderutilized).",
    )
    consolidate_after: str | None = field(
        default=None,
        doc="How long a node must be empty (WhenEmpty) before it is removed, or Never.",
        pattern=NILLABLE_DURATION_PATTERN,
        max_length=64,
    )
    expire_after: str = field(
        default="720h",
        doc=EXPIRE_AFTER_DOC + " (v1: spec.template.spec.expireAfter)",
        pattern=NILLABLE_DURATION_PATTERN,
        max_length=64,
    )
    budgets: tuple[Budget, ...] = field(
        factory=lambda: (Budget(),),
        doc="Disruption budgets; the most restrictive active one wins.",
        max_items=50,
        rules=(
            Rule(
                rule="self.all(x, has(x.schedule) == has(x.duration))",
                message="'schedule' must be set with 'duration'",
            ),
        ),
    )


DISRUPTION_RULES: Final = (
    Rule(
        rule="self.consolidationPolicy != 'WhenEmpty' || has(self.consolidateAfter)",
        message="consolidateAfter must be specified with consolidationPolicy=WhenEmpty",
    ),
)


@attrs.frozen(kw_only=True)
class NodePoolSpec:
    template: NodeClaimTemplate = field(doc="Template of the NodeClaims this pool launches.")
    disruption: Disruption = field(
        factory=Disruption, doc="How nodes of this pool may be disrupted.", rules=DISRUPTION_RULES
    )
    limits: Mapping[str, Quantity] = field(
        factory=dict,
        doc="Upper bound on the summed capacity of the pool's nodes.",
        crd_default=False,
        max_properties=64,
        values=item(pattern=QUANTITY_PATTERN),
    )
    weight: int | None = field(
        default=None,
        doc="Priority among NodePools, 1-100.",
        minimum=1,
        maximum=100,
        format="int32",
    )


@attrs.frozen(kw_only=True)
class NodePool:
    """A Karpenter v0.32-v0.37 NodePool; stored as v1."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1beta1"
    KIND: ClassVar[str] = "NodePool"
    PLURAL: ClassVar[str] = "nodepools"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodePoolSpec = field(doc="Desired state of the NodePool.")
    status: NodePoolStatus = field(
        factory=NodePoolStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="NodePool", crd_default=False)


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
    kubelet: KubeletConfiguration | None = _kubelet()
    expire_after: str = field(
        default="720h",
        doc=EXPIRE_AFTER_DOC + " (v1 field)",
        pattern=NILLABLE_DURATION_PATTERN,
        max_length=64,
    )
    termination_grace_period: str | None = field(
        default=None, doc=TGP_DOC + " (v1 field)", pattern=DURATION_PATTERN, max_length=64
    )


@attrs.frozen(kw_only=True)
class NodeClaim:
    """A Karpenter v0.32-v0.37 NodeClaim; stored as v1."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1beta1"
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
