"""KWOKNodeClass (karpenter.kwok.sh/v1alpha1): the NodeClass of the kwok provider.

kwok nodes need no launch configuration, so the class exists mainly so a NodePool can reference
a NodeClass exactly as it would an EC2NodeClass; its status defaults to Ready so pools referencing
it work without a controller. The one spec field, nodeRegistrationDelay, lets a test hold back
Node registration to exercise the same waiting paths a slow cloud instance would.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Final

import attrs

from karpy.apis.duration import parse_duration
from karpy.apis.meta import (
    DURATION_PATTERN,
    Condition,
    ConditionStatus,
    ObjectMeta,
    conditions_field,
)
from karpy.apis.schema import field
from karpy_kwok.apis import labels as kwoklabels

API_VERSION = f"{kwoklabels.KWOK_GROUP}/v1alpha1"

ANNOTATION_NODECLASS_HASH: Final = f"{kwoklabels.KWOK_GROUP}/kwoknodeclass-hash"
"""The hash of the KWOKNodeClass spec a NodeClaim was launched with (static NodeClass drift)."""
ANNOTATION_NODECLASS_HASH_VERSION: Final = f"{kwoklabels.KWOK_GROUP}/kwoknodeclass-hash-version"
NODECLASS_HASH_VERSION: Final = "v1"
"""Bumped when what `static_hash` covers changes, so old annotations are not read as drift."""

# The fixed timestamp the schema default carries (the apiserver needs a literal).
READY_SINCE = datetime(2024, 1, 1, 1, 1, 1, tzinfo=UTC)


def _ready_status() -> KWOKNodeClassStatus:
    return KWOKNodeClassStatus(
        conditions=(
            Condition(
                type="Ready",
                status=ConditionStatus.TRUE,
                last_transition_time=READY_SINCE,
                reason="Ready",
            ),
        )
    )


@attrs.frozen(kw_only=True)
class KWOKNodeClassSpec:
    node_registration_delay: str | None = field(
        default=None,
        doc=(
            "How long after its NodeClaim is launched a kwok Node registers, e.g. 30s or 1m30s; "
            "unset registers at once."
        ),
        pattern=DURATION_PATTERN,
        max_length=64,
    )

    def registration_delay(self) -> timedelta:
        """The delay as a timedelta (zero when unset)."""
        if self.node_registration_delay is None:
            return timedelta(0)
        parsed = parse_duration(
            self.node_registration_delay, field_name="spec.nodeRegistrationDelay"
        )
        # DURATION_PATTERN admits no "Never", so a parsed value is always a timedelta.
        return parsed if parsed is not None else timedelta(0)


@attrs.frozen(kw_only=True)
class KWOKNodeClassStatus:
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class KWOKNodeClass:
    """A NodeClass for simulated (kwok) nodes."""

    GROUP: ClassVar[str] = kwoklabels.KWOK_GROUP
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "KWOKNodeClass"
    PLURAL: ClassVar[str] = "kwoknodeclasses"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: KWOKNodeClassSpec = field(
        factory=KWOKNodeClassSpec,
        doc="How kwok simulates nodes of this class.",
        crd_default=False,
    )
    status: KWOKNodeClassStatus = field(
        factory=_ready_status, doc="Readiness; Ready unless something reports otherwise."
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="KWOKNodeClass", crd_default=False)


def static_hash(spec: KWOKNodeClassSpec) -> str:
    """Digest of the spec's fields (the registration delay, by value: `60s` equals `1m`); a
    NodeClaim whose recorded hash differs has drifted from its KWOKNodeClass (NodeClassDrift)."""
    delay = spec.registration_delay().total_seconds()
    canonical = repr(sorted({"nodeRegistrationDelay": delay}.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
