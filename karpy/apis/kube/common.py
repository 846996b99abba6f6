"""Core Kubernetes value types shared by pods, nodes and karpy's own CRDs.

Taints appear both on Nodes and inside NodePool/NodeClaim specs, and node selector
requirements both in pod affinity and (with minValues) in NodePools. Defining them once, with
schema metadata, keeps the CRD schema for a NodePool taint identical to what a Node carries.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime

import attrs

from karpy.apis.meta import LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN, Quantity
from karpy.apis.schema import field


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@attrs.frozen(kw_only=True)
class Taint:
    """A node taint: pods that do not tolerate it are kept off (or evicted from) the node."""

    key: str = field(
        doc="Taint key (a qualified name).",
        pattern=QUALIFIED_NAME_PATTERN,
        min_length=1,
        max_length=316,
    )
    effect: TaintEffect = field(doc="NoSchedule, PreferNoSchedule or NoExecute.")
    value: str | None = field(
        default=None, doc="Taint value.", pattern=LABEL_VALUE_PATTERN, max_length=63
    )
    time_added: datetime | None = field(
        default=None, doc="When a NoExecute taint was added.", format="date-time"
    )


class TolerationOperator(enum.StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


@attrs.frozen(kw_only=True)
class Toleration:
    """A pod's tolerance of a taint. An empty key with Exists tolerates everything."""

    key: str | None = None
    operator: TolerationOperator | None = None
    value: str | None = None
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None


class NodeSelectorOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@attrs.frozen(kw_only=True)
class NodeSelectorRequirement:
    key: str = field(doc="The label key the requirement constrains.")
    operator: NodeSelectorOperator = field(doc="In, NotIn, Exists, DoesNotExist, Gt or Lt.")
    values: tuple[str, ...] = field(
        factory=tuple, doc="Values for In/NotIn; one integer for Gt/Lt.", crd_default=False
    )


@attrs.frozen(kw_only=True)
class NodeSelectorTerm:
    """Expressions and fields within one term are ANDed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@attrs.frozen(kw_only=True)
class NodeSelector:
    """Terms are ORed."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class LabelSelectorOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@attrs.frozen(kw_only=True)
class LabelSelectorRequirement:
    key: str
    operator: LabelSelectorOperator
    values: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class LabelSelector:
    """A label query. An empty selector matches everything; a missing one (None) nothing."""

    match_labels: Mapping[str, str] = attrs.field(factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


@attrs.frozen(kw_only=True)
class ResourceRequirements:
    limits: Mapping[str, Quantity] = attrs.field(factory=dict)
    requests: Mapping[str, Quantity] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LocalObjectReference:
    name: str


@attrs.frozen(kw_only=True)
class TypedObjectReference:
    kind: str
    name: str
    api_group: str | None = None
