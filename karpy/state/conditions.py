"""Status-condition arithmetic shared by every controller that writes conditions on NodePools
and NodeClaims: lastTransitionTime moves only when the status changes, an unchanged condition is
the same tuple (so "did anything change?" is an identity test), and a cleared condition is gone.
Pure: the time is an argument.
"""

from __future__ import annotations

import datetime

import attrs

from karpy.apis.meta import Condition, ConditionStatus
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim


def find(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    """The condition of type `kind`, or None."""
    return next((c for c in conditions if c.type == kind), None)


def is_true(conditions: tuple[Condition, ...], kind: str) -> bool:
    condition = find(conditions, kind)
    return condition is not None and condition.status is ConditionStatus.TRUE


def with_condition(
    conditions: tuple[Condition, ...],
    kind: str,
    status: ConditionStatus,
    *,
    reason: str,
    message: str = "",
    now: datetime.datetime,
) -> tuple[Condition, ...]:
    """`conditions` with `kind` set; the same tuple when nothing differs."""
    current = find(conditions, kind)
    if current is not None and (current.status, current.reason, current.message) == (
        status,
        reason,
        message,
    ):
        return conditions
    since = now if current is None or current.status is not status else current.last_transition_time
    condition = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since.replace(microsecond=0),
    )
    return (*(c for c in conditions if c.type != kind), condition)


def without_condition(conditions: tuple[Condition, ...], kind: str) -> tuple[Condition, ...]:
    """`conditions` without `kind`; the same tuple when it was not there."""
    if find(conditions, kind) is None:
        return conditions
    return tuple(c for c in conditions if c.type != kind)


# ---------------------------------------------------------------- NodeClaims

READY_DEPENDENTS = (ConditionType.LAUNCHED, ConditionType.REGISTERED, ConditionType.INITIALIZED)


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
    if conditions is current:
        return nodeclaim
    return attrs.evolve(nodeclaim, status=attrs.evolve(nodeclaim.status, conditions=conditions))


def with_ready(nodeclaim: NodeClaim, *, now: datetime.datetime) -> NodeClaim:
    """`nodeclaim` with Ready = True when its dependents all are, else Unknown naming them."""
    pending = [kind for kind in READY_DEPENDENTS if not claim_is_true(nodeclaim, kind)]
    if not pending:
        return set_condition(
            nodeclaim, ConditionType.READY, ConditionStatus.TRUE, reason="Ready", now=now
        )
    message = ", ".join(f"{kind} is not True" for kind in pending)
    return set_condition(
        nodeclaim,
        ConditionType.READY,
        ConditionStatus.UNKNOWN,
        reason="UnhealthyDependents",
        message=message,
        now=now,
    )
