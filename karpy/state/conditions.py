"""NodeClaim conditions: the NodeClaim's condition set and object-level helpers over it.

The condition arithmetic itself (transition times, the root `Ready` derived from dependents)
is `karpy.apis.conditions`, shared with NodePools and providers' NodeClasses; this module
applies it to a NodeClaim, whose `Ready` depends on Launched, Registered and Initialized.
Pure: the time is an argument.
"""

from __future__ import annotations

import datetime
from typing import Final

import attrs

from karpy.apis.conditions import ConditionSet, find, is_true, with_condition
from karpy.apis.meta import Condition, ConditionStatus
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim

__all__ = [
    "NODECLAIM_CONDITIONS",
    "READY_DEPENDENTS",
    "claim_is_true",
    "get_condition",
    "set_condition",
    "with_ready",
]

READY_DEPENDENTS: Final = (
    ConditionType.LAUNCHED,
    ConditionType.REGISTERED,
    ConditionType.INITIALIZED,
)
NODECLAIM_CONDITIONS: Final = ConditionSet(dependents=READY_DEPENDENTS, root=ConditionType.READY)
"""A NodeClaim is Ready once it is launched, registered and initialized."""


def get_condition(nodeclaim: NodeClaim, kind: ConditionType) -> Condition | None:
    """The NodeClaim's condition of type `kind`, or None when it has none."""
    return find(nodeclaim.status.conditions, kind)


def claim_is_true(nodeclaim: NodeClaim, kind: ConditionType) -> bool:
    """Whether the NodeClaim's condition `kind` is True."""
    return is_true(nodeclaim.status.conditions, kind)


def set_condition(
    nodeclaim: NodeClaim,
    kind: ConditionType,
    status: ConditionStatus,
    *,
    reason: str,
    message: str = "",
    now: datetime.datetime,
) -> NodeClaim:
    """`nodeclaim` with condition `kind` set; unchanged (same object) when nothing differs."""
    current = nodeclaim.status.conditions
    conditions = with_condition(current, kind, status, reason=reason, message=message, now=now)
    return _with_conditions(nodeclaim, current, conditions)


def with_ready(nodeclaim: NodeClaim, *, now: datetime.datetime) -> NodeClaim:
    """`nodeclaim` with Ready derived from its dependents (`NODECLAIM_CONDITIONS`); unchanged
    (same object) when it already says so."""
    current = nodeclaim.status.conditions
    return _with_conditions(nodeclaim, current, NODECLAIM_CONDITIONS.with_root(current, now=now))


def _with_conditions(
    nodeclaim: NodeClaim, current: tuple[Condition, ...], conditions: tuple[Condition, ...]
) -> NodeClaim:
    if conditions is current:
        return nodeclaim
    return attrs.evolve(nodeclaim, status=attrs.evolve(nodeclaim.status, conditions=conditions))
