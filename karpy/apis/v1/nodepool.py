"""NodePool (karpenter.sh/v1): what nodes may be launched, and how they may be disrupted.

The wire shape, defaults and CEL rules match Karpenter v1 so users' existing NodePool
manifests apply unchanged and bad ones are refused by the apiserver, naming the field.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import (
    DURATION_PATTERN,
    LABEL_VALUE_PATTERN,
    NILLABLE_DURATION_PATTERN,
    QUANTITY_PATTERN,
    Condition,
    ObjectMeta,
    Quantity,
    conditions_field,
)
from karpy.apis.schema import Rule, field, item
from karpy.apis.v1 import labels
from karpy.apis.v1.common import (
    NODECLASSREF_IMMUTABLE_RULES,
    TEMPLATE_LABEL_RULES,
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
)

API_VERSION = f"{labels.GROUP}/v1"


class ConsolidationPolicy(enum.StrEnum):
    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
    BALANCED = "Balanced"


class ConditionType(enum.StrEnum):
    """NodePool condition types, as Karpenter names them."""

    VALIDATION_SUCCEEDED = "ValidationSucceeded"
    NODE_CLASS_READY = "NodeClassReady"
    NODE_REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
    READY = "Ready"


class DisruptionReason(enum.StrEnum):
    UNDERUTILIZED = "Underutilized"
    EMPTY = "Empty"
    DRIFTED = "Drifted"


CRON_PATTERN = (
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|"
    r"[0-9A-Za-z*?/,-]+(\s+[0-9A-Za-z*?/,-]+){4})$"
)
BUDGET_DURATION_PATTERN = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
BUDGET_NODES_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"


@attrs.frozen(kw_only=True)
class Budget:
    """How many of the pool's nodes may be disrupted at once, optionally in a cron window."""

    nodes: str = field(
        default="10%",
        doc=(
            "Maximum NodeClaims of this pool that may be disrupting at once: an integer or a "
            "percentage (rounded up). Counts nodes already being deleted."
        ),
        pattern=BUDGET_NODES_PATTERN,
        max_length=16,
    )
    schedule: str | None = field(
        default=None,
        doc=(
            "When the budget becomes active: 5-field cron (UTC) or @daily/@hourly/... "
            "Requires duration."
        ),
        pattern=CRON_PATTERN,
        max_length=128,
    )
    duration: str | None = field(
        default=None,
        doc=(
            "How long the budget stays active after each schedule hit, in h and m. "
            "Requires schedule."
        ),
        pattern=BUDGET_DURATION_PATTERN,
        max_length=32,
    )
    reasons: tuple[DisruptionReason, ...] = field(
        factory=tuple,
        crd_default=False,
        doc="Disruption reasons this budget limits (Underutilized, Empty, Drifted); omitted = all.",
        max_items=3,
    )


@attrs.frozen(kw_only=True)
class Disruption:
    """Consolidation policy and disruption budgets."""

    consolidation_policy: ConsolidationPolicy = field(
        default=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        doc=(
            "Which nodes consolidation may remove or replace: only empty ones, or also "
            "underutilized ones."
        ),
    )
    consolidate_after: str = field(
        default="0s",
        doc=(
            "How long a node must go without pod scheduling or removal before it may be "
            "consolidated; Never turns consolidation off."
        ),
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


@attrs.frozen(kw_only=True)
class NodeClaimTemplateMetadata:
    labels: Mapping[str, str] = field(
        factory=dict,
        doc="Labels copied onto every NodeClaim and Node. Restricted domains are refused.",
        crd_default=False,
        max_properties=100,
        values=item(max_length=63, pattern=LABEL_VALUE_PATTERN),
        rules=TEMPLATE_LABEL_RULES,
    )
    annotations: Mapping[str, str] = field(
        factory=dict, doc="Annotations copied onto every NodeClaim and Node.", crd_default=False
    )


TAINTS_DOC = "Taints put on the Node; pods must tolerate them to be provisioned for this pool."
STARTUP_TAINTS_DOC = (
    "Taints expected to be removed by an agent after boot; pods need not tolerate them, and the "
    "node is not Initialized until they are gone."
)
EXPIRE_AFTER_DOC = "Maximum node lifetime from creation (forceful, not budgeted), or Never."
TGP_DOC = (
    "Maximum drain time once deletion starts; afterwards PDBs and do-not-disrupt are bypassed."
)


@attrs.frozen(kw_only=True)
class NodeClaimTemplateSpec:
    """The NodeClaim spec every node of the pool starts from."""

    requirements: tuple[NodeSelectorRequirementWithMinValues, ...] = field(
        doc="Node selector requirements limiting instance types, zones, capacity types and more.",
        max_items=100,
    )
    node_class_ref: NodeClassReference = field(
        wire="nodeClassRef",
        doc="The provider NodeClass; group and kind are immutable.",
        rules=NODECLASSREF_IMMUTABLE_RULES,
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
class NodeClaimTemplate:
    spec: NodeClaimTemplateSpec = field(doc="Spec of the NodeClaims this pool creates.")
    metadata: NodeClaimTemplateMetadata = field(
        factory=NodeClaimTemplateMetadata,
        doc="Labels and annotations of the NodeClaims and Nodes.",
        crd_default=False,
    )


@attrs.frozen(kw_only=True)
class NodePoolSpec:
    template: NodeClaimTemplate = field(doc="Template of the NodeClaims this pool launches.")
    disruption: Disruption = field(
        factory=Disruption, doc="How nodes of this pool may be disrupted."
    )
    limits: Mapping[str, Quantity] = field(
        factory=dict,
        doc=(
            "Upper bound on the summed capacity of the pool's nodes (cpu, memory, nodes, ...), "
            "and with karpy.sh/cost-per-hour on their summed hourly price."
        ),
        crd_default=False,
        max_properties=64,
        values=item(pattern=QUANTITY_PATTERN),
        rules=(
            Rule(
                rule=(
                    "self.all(k, !k.startsWith('karpy.sh/') || k == '"
                    + labels.LIMIT_COST_PER_HOUR
                    + "')"
                ),
                message=(
                    "the only karpy.sh/ limit is "
                    + labels.LIMIT_COST_PER_HOUR
                    + " (a cap on the pool's hourly price)"
                ),
                reason="FieldValueInvalid",
            ),
        ),
    )
    weight: int | None = field(
        default=None,
        doc="Priority among NodePools, 1-100; higher is tried first. Unset means 0.",
        minimum=1,
        maximum=100,
        format="int32",
    )
    replicas: int | None = field(
        default=None,
        doc=(
            "Static NodePool: keep exactly this many nodes whatever the pods ask for (needs the "
            "StaticCapacity feature gate). Consolidation leaves its nodes alone; only "
            "limits.nodes and no weight may be set with it; it cannot be added or removed "
            "after creation."
        ),
        minimum=0,
        format="int64",
    )


@attrs.frozen(kw_only=True)
class NodePoolStatus:
    resources: Mapping[str, Quantity] = field(
        factory=dict, doc="Summed capacity of the pool's nodes.", crd_default=False
    )
    nodes: int | None = field(default=None, doc="Number of nodes in the pool.", format="int64")
    node_class_observed_generation: int | None = field(
        default=None,
        doc=(
            "Generation of the NodeClass NodeRegistrationHealthy was last reset for; a newer one "
            "resets it to Unknown."
        ),
        format="int64",
    )
    conditions: tuple[Condition, ...] = conditions_field()


NODEPOOL_SPEC_RULES = (
    Rule(
        rule="has(self.replicas) == has(oldSelf.replicas)",
        message="Cannot transition NodePool between static and dynamic",
        reason="FieldValueForbidden",
    ),
    Rule(
        rule="!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')",
        message="only 'limits.nodes' is supported on static NodePools",
        field_path=".limits",
    ),
    Rule(
        rule="!has(self.replicas) || !has(self.weight)",
        message="'weight' is not supported on static NodePools",
        field_path=".weight",
    ),
)


@attrs.frozen(kw_only=True)
class NodePool:
    """A pool of nodes karpy may launch for pending pods."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "NodePool"
    PLURAL: ClassVar[str] = "nodepools"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodePoolSpec = field(doc="Desired state of the NodePool.", rules=NODEPOOL_SPEC_RULES)
    status: NodePoolStatus = field(
        factory=NodePoolStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="NodePool", crd_default=False)
