"""Status-condition arithmetic for NodeClaims, kept in one place so every sub-reconciler sets
conditions the same way: lastTransitionTime moves only when the status changes, and Ready is
derived from Launched, Registered and Initialized as Karpenter derives it."""

from __future__ import annotations

import datetime

import attrs

from karpy.apis.meta import Condition, ConditionStatus
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim

READY_DEPENDENTS = (ConditionType.LAUNCHED, ConditionType.REGISTERED, ConditionType.INITIALIZED)


def get_condition(nodeclaim: NodeClaim, kind: ConditionType) -> Condition | None:
    """The condition of type `kind`, or None when the NodeClaim has none."""
    return next((c for c in nodeclaim.status.conditions if c.type == kind), None)


def is_true(nodeclaim: NodeClaim, kind: ConditionType) -> bool:
    condition = get_condition(nodeclaim, kind)
    return condition is not None and condition.status is ConditionStatus.TRUE


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
    current = get_condition(nodeclaim, kind)
    if current is not None and (current.status, current.reason, current.message) == (
        status,
        reason,
        message,
    ):
        return nodeclaim
    since = now if current is None or current.status is not status else current.last_transition_time
    condition = Condition(
        type=kind, status=status, reason=reason, message=message, last_transition_time=since
    )
    others = tuple(c for c in nodeclaim.status.conditions if c.type != kind)
    status_value = attrs.evolve(nodeclaim.status, conditions=(*others, condition))
    return attrs.evolve(nodeclaim, status=status_value)


def with_ready(nodeclaim: NodeClaim, *, now: datetime.datetime) -> NodeClaim:
    """`nodeclaim` with Ready = True when its dependents all are, else Unknown naming them."""
    pending = [kind for kind in READY_DEPENDENTS if not is_true(nodeclaim, kind)]
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
