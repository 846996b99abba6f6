"""NodeOverlay (karpenter.sh/v1alpha1): prices and extended resources the provider does not report.

A provider quotes list prices and the resources it knows of. Users pay otherwise (Savings Plans,
Reserved Instances, negotiated discounts, licence fees) and run device plugins that add
resources (`example.com/widget`). A NodeOverlay tells karpy so: its requirements select instance
types (and offerings, by zone and capacity type) and it sets their price (`price`), shifts it
(`priceAdjustment`, absolute `+0.5` or percent `-10%`) or adds extended resources (`capacity`).
Weight orders overlays that select the same type; equal weights that disagree are a conflict.
The wire shape and CEL rules are Karpenter's, so its NodeOverlay manifests apply unchanged and
bad ones are refused by the apiserver, naming the field. What karpy does with them:
karpy.core.overlays (the rules) and karpy.controllers.nodeoverlay (status, and the catalog
every scheduling decision reads).
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar, Final

import attrs

from karpy.apis.meta import (
    LABEL_VALUE_PATTERN,
    QUALIFIED_NAME_PATTERN,
    QUANTITY_PATTERN,
    Condition,
    ObjectMeta,
    Quantity,
    conditions_field,
)
from karpy.apis.schema import Rule, field, item
from karpy.apis.v1 import labels
from karpy.apis.v1.common import (
    REQUIREMENT_RULES,
    RequirementOperator,
    label_key_rules,
    nodeclaim_allowed_keys,
)

API_VERSION: Final = f"{labels.GROUP}/v1alpha1"

PRICE_PATTERN: Final = r"^\d+(\.\d+)?$"
"""An absolute hourly price: digits, optionally a fraction (Karpenter's pattern)."""

PRICE_ADJUSTMENT_PATTERN: Final = (
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
)
"""A signed change: `+0.5` / `-0.1` (absolute) or `+10%` / `-15%` (at most -100%); Karpenter's."""

STANDARD_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage", "pods")
"""Resources a provider always reports; an overlay's capacity may not touch them."""


class ConditionType(enum.StrEnum):
    """NodeOverlay condition types, as Karpenter names them."""

    VALIDATION_SUCCEEDED = "ValidationSucceeded"
    READY = "Ready"


class Reason(enum.StrEnum):
    """Why ValidationSucceeded is False: Karpenter's reasons, and karpy's for a disabled gate."""

    CONFLICT = "Conflict"
    """Another overlay of the same weight changes the same offering's price or resource."""
    RUNTIME_VALIDATION = "RuntimeValidation"
    """A requirement the apiserver accepted cannot be read (bad operator use, bounds)."""
    FEATURE_GATE_DISABLED = "NodeOverlayDisabled"
    """FEATURE_GATES does not turn NodeOverlay on: the overlay is stored but not applied."""


@attrs.frozen(kw_only=True)
class NodeSelectorRequirement:
    """Selects instance types by a label (well-known, the provider's, a NodePool's)."""

    __rules__ = (
        *REQUIREMENT_RULES[:3],
        Rule(
            rule="self.operator == 'NotIn' ? (has(self.values) && self.values.size() != 0) : true",
            message="requirements with operator 'NotIn' must have a value defined",
            field_path=".values",
        ),
    )

    key: str = field(
        doc="The label key the requirement selects on.",
        pattern=QUALIFIED_NAME_PATTERN,
        max_length=316,
        rules=label_key_rules(
            allowed=nodeclaim_allowed_keys, over_map=False, forbid_nodepool=False
        ),
    )
    operator: RequirementOperator = field(
        doc="In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte."
    )
    values: tuple[str, ...] = field(
        factory=tuple,
        doc="Values for In/NotIn; one non-negative integer for Gt/Lt/Gte/Lte.",
        crd_default=False,
        list_type="atomic",
        max_items=1000,
        items=item(max_length=63, pattern=LABEL_VALUE_PATTERN),
    )


@attrs.frozen(kw_only=True)
class NodeOverlaySpec:
    requirements: tuple[NodeSelectorRequirement, ...] = field(
        doc=(
            "Which instance types and offerings the overlay applies to (empty: all). Keys may "
            "be well-known labels, the provider's, karpenter.sh/nodepool and labels from a "
            "NodePool's template."
        ),
        max_items=100,
    )
    price_adjustment: str | None = field(
        default=None,
        doc=(
            "Change to the offerings' hourly price: absolute ('+0.5', '-0.1') or percent "
            "('+10%', '-15%'); a result below zero is zero. Not with price."
        ),
        pattern=PRICE_ADJUSTMENT_PATTERN,
        max_length=32,
    )
    price: str | None = field(
        default=None,
        doc="Hourly price of the selected offerings, replacing the provider's. Not with "
        "priceAdjustment.",
        pattern=PRICE_PATTERN,
        max_length=32,
    )
    capacity: Mapping[str, Quantity] = field(
        factory=dict,
        doc=(
            "Extended resources added to the selected instance types' capacity (a resource "
            "they already report is replaced); cpu, memory, ephemeral-storage and pods are "
            "restricted."
        ),
        crd_default=False,
        max_properties=64,
        values=item(pattern=QUANTITY_PATTERN),
        rules=(
            Rule(
                rule="self.all(x, !(x in "
                + "["
                + ", ".join(f"'{r}'" for r in STANDARD_RESOURCES)
                + "]))",
                message=(
                    "capacity may only add extended resources: cpu, memory, "
                    "ephemeral-storage and pods are restricted"
                ),
                reason="FieldValueForbidden",
            ),
        ),
    )
    weight: int | None = field(
        default=None,
        doc=(
            "Precedence among overlays selecting the same type, 1-10000; higher wins. Unset "
            "means 0. Equal weights that change the same price or resource conflict."
        ),
        minimum=1,
        maximum=10000,
        format="int32",
    )


NODEOVERLAY_SPEC_RULES: Final = (
    Rule(
        rule="!has(self.price) || !has(self.priceAdjustment)",
        message="cannot set both 'price' and 'priceAdjustment'",
    ),
)


@attrs.frozen(kw_only=True)
class NodeOverlayStatus:
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class NodeOverlay:
    """Alternative prices and extra resources for the instance types it selects."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "NodeOverlay"
    PLURAL: ClassVar[str] = "nodeoverlays"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodeOverlaySpec = field(
        doc="Which types the overlay selects and what it changes.", rules=NODEOVERLAY_SPEC_RULES
    )
    status: NodeOverlayStatus = field(
        factory=NodeOverlayStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="NodeOverlay", crd_default=False)
