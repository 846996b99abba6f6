"""KWOKNodeClass (karpenter.kwok.sh/v1alpha1): the NodeClass of the kwok provider.

kwok nodes need no launch configuration, so the class carries no spec; it exists so a NodePool
can reference a NodeClass exactly as it would an EC2NodeClass, and its status defaults to Ready
so pools referencing it work without a controller.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

import attrs

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, conditions_field
from karpy.apis.schema import field
from karpy.apis.v1 import labels

API_VERSION = f"{labels.KWOK_GROUP}/v1alpha1"

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
class KWOKNodeClassStatus:
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class KWOKNodeClass:
    """A NodeClass for simulated (kwok) nodes."""

    GROUP: ClassVar[str] = labels.KWOK_GROUP
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str] = "KWOKNodeClass"
    PLURAL: ClassVar[str] = "kwoknodeclasses"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    status: KWOKNodeClassStatus = field(
        factory=_ready_status, doc="Readiness; Ready unless something reports otherwise."
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="KWOKNodeClass", crd_default=False)
