"""Object metadata, conditions and the scalar types every Kubernetes API object shares.

Kubernetes spreads these over apimachinery (ObjectMeta, OwnerReference, Condition, Time,
IntOrString, Quantity). karpy needs one definition of each so the codec knows how to put
them on the wire (RFC 3339 times, int-or-string, quantities kept as their exact strings) and
so a Condition written by karpy has the shape `kubectl wait --for=condition=Ready` expects.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import NewType, Protocol

import attrs

from karpy.apis.schema import Rule, field

# A resource quantity exactly as written ("1500m", "4Gi", "2"). Parsing and arithmetic live in
# karpy.core.resources; the API layer keeps the string so a round trip never changes it.
Quantity = NewType("Quantity", str)

# Kubernetes IntOrString: a budget's "10%" or 3, a PDB's maxUnavailable.
IntOrString = int | str

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# A qualified name: optional DNS-subdomain prefix and "/", then a name of up to 63 chars.
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# Go duration strings restricted to hours, minutes and seconds, as Karpenter's CRDs accept;
# karpy.apis.duration parses them.
DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"
NILLABLE_DURATION_PATTERN = r"^(([0-9]+(s|m|h))+|Never)$"


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class OwnerReference:
    """Who owns an object; the garbage collector deletes dependents with their owner."""

    api_version: str = field(doc="API version of the owner.")
    kind: str = field(doc="Kind of the owner.")
    name: str = field(doc="Name of the owner.")
    uid: str = field(doc="UID of the owner.")
    controller: bool | None = field(default=None, doc="True when the owner is the controller.")
    block_owner_deletion: bool | None = field(
        default=None, doc="Foreground deletion waits for this dependent."
    )


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """The metadata fields karpy reads or writes (managedFields are not modelled)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()


class HasMetadata(Protocol):
    """Any Kubernetes object model: what reads and writes of its metadata need."""

    @property
    def metadata(self) -> ObjectMeta: ...


def with_labels(metadata: ObjectMeta, changes: Mapping[str, str | None]) -> ObjectMeta:
    """`metadata` with its labels changed: each key set to its value, or removed where the
    value is None (as a merge patch reads a map)."""
    return attrs.evolve(metadata, labels=_changed(metadata.labels, changes))


def with_annotations(metadata: ObjectMeta, changes: Mapping[str, str | None]) -> ObjectMeta:
    """`metadata` with its annotations changed, as `with_labels`."""
    return attrs.evolve(metadata, annotations=_changed(metadata.annotations, changes))


def _changed(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    updated = {**current, **{k: v for k, v in changes.items() if v is not None}}
    return {k: v for k, v in updated.items() if changes.get(k, v) is not None}


CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


@attrs.frozen(kw_only=True)
class Condition:
    """A status condition in the upstream metav1.Condition shape."""

    type: str = field(
        doc="Condition type in CamelCase or foo.example.com/CamelCase.",
        pattern=CONDITION_TYPE_PATTERN,
        max_length=316,
    )
    status: ConditionStatus = field(doc="True, False or Unknown.")
    last_transition_time: datetime = field(doc="When the status last changed.", format="date-time")
    reason: str = field(
        doc="Programmatic CamelCase identifier of the last transition.",
        pattern=CONDITION_REASON_PATTERN,
        min_length=1,
        max_length=1024,
    )
    message: str = field(default="", doc="Human-readable detail.", max_length=32768, required=True)
    observed_generation: int | None = field(
        default=None, doc="metadata.generation this condition was computed for.", minimum=0
    )


CONDITIONS_FIELD_DOC = "Signals for health and readiness; Ready aggregates the others."


def conditions_field() -> tuple[Condition, ...]:
    """The `status.conditions` field every karpy CRD shares."""
    result: tuple[Condition, ...] = field(
        factory=tuple,
        doc=CONDITIONS_FIELD_DOC,
        crd_default=False,
        list_type="map",
        list_map_keys=("type",),
        max_items=64,
    )
    return result


IMMUTABLE = Rule(rule="self == oldSelf", message="value is immutable")
