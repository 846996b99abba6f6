"""Status conditions as a set: setting and clearing one, and the root `Ready` derived from the rest.

Every karpy kind with a status (NodeClaim, NodePool, each provider's NodeClass) keeps a list of
metav1-shaped conditions with one root, `Ready`, that summarises its dependents, as Karpenter's
operatorpkg `status.ConditionSet` does. The rules live here once, below both the core
controllers and the providers, so they cannot drift apart:

* `lastTransitionTime` moves only when a condition's status changes; a new reason or message
  keeps it.
* A condition that is already as wanted is left alone, and then the same tuple comes back, so
  "did anything change?" is an identity test. A changed condition moves to the end of the list.
* `Ready` is True when every dependent is True; otherwise False when any dependent is False,
  else Unknown, with reason `UnhealthyDependents` and a message naming the dependents that are
  not True.

Pure: the time is an argument.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Sequence
from typing import Final

import attrs

from karpy.apis.meta import Condition, ConditionStatus

READY: Final = "Ready"
REASON_READY: Final = "Ready"
REASON_UNHEALTHY_DEPENDENTS: Final = "UnhealthyDependents"


def find(conditions: Sequence[Condition], kind: str) -> Condition | None:
    """The condition of type `kind`, or None."""
    return next((c for c in conditions if c.type == kind), None)


def is_true(conditions: Sequence[Condition], kind: str) -> bool:
    """Whether the condition of type `kind` is there and True."""
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
    generation: int | None = None,
) -> tuple[Condition, ...]:
    """`conditions` with `kind` set; the same tuple when nothing differs.

    `generation` is the object's metadata.generation the condition was computed for
    (observedGeneration); when given, a condition computed for another generation differs.
    """
    current = find(conditions, kind)
    if (
        current is not None
        and (current.status, current.reason, current.message) == (status, reason, message)
        and (generation is None or current.observed_generation == generation)
    ):
        return conditions
    since = now if current is None or current.status is not status else current.last_transition_time
    condition = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since.replace(microsecond=0),
        observed_generation=generation,
    )
    return (*(c for c in conditions if c.type != kind), condition)


def without_condition(conditions: tuple[Condition, ...], kind: str) -> tuple[Condition, ...]:
    """`conditions` without `kind`; the same tuple when it was not there."""
    if find(conditions, kind) is None:
        return conditions
    return tuple(c for c in conditions if c.type != kind)


class Summary(enum.Enum):
    """How the root condition's message names the dependents that are not True."""

    BRIEF = "brief"
    """`Registered is not True, Initialized is not True` (NodeClaims, NodePools)."""
    DETAILED = "detailed"
    """`SubnetsReady=False (SubnetsNotFound: ...); AMIsReady=False (...)`: each with its reason
    and message, for conditions whose messages tell the user what to fix (NodeClasses)."""


@attrs.frozen
class ConditionSet:
    """The conditions of one kind: `dependents`, and the `root` that summarises them."""

    dependents: tuple[str, ...]
    root: str = READY
    summary: Summary = Summary.BRIEF

    def set(
        self,
        conditions: tuple[Condition, ...],
        kind: str,
        status: ConditionStatus,
        *,
        reason: str,
        message: str = "",
        now: datetime.datetime,
        generation: int | None = None,
    ) -> tuple[Condition, ...]:
        """`conditions` with `kind` set and the root derived again when `kind` is a dependent;
        the same tuple when nothing differs."""
        updated = with_condition(
            conditions,
            kind,
            status,
            reason=reason,
            message=message,
            now=now,
            generation=generation,
        )
        if kind not in self.dependents:
            return updated
        return self.with_root(updated, now=now, generation=generation)

    def clear(
        self,
        conditions: tuple[Condition, ...],
        kind: str,
        *,
        now: datetime.datetime,
        generation: int | None = None,
    ) -> tuple[Condition, ...]:
        """`conditions` without `kind`, the root derived again when `kind` is a dependent."""
        updated = without_condition(conditions, kind)
        if kind not in self.dependents:
            return updated
        return self.with_root(updated, now=now, generation=generation)

    def with_root(
        self,
        conditions: tuple[Condition, ...],
        *,
        now: datetime.datetime,
        generation: int | None = None,
    ) -> tuple[Condition, ...]:
        """`conditions` with the root derived from the dependents; the same tuple when it
        already says so."""
        states = [(kind, find(conditions, kind)) for kind in self.dependents]
        pending = [
            (kind, c) for kind, c in states if c is None or c.status is not ConditionStatus.TRUE
        ]
        if not pending:
            return with_condition(
                conditions,
                self.root,
                ConditionStatus.TRUE,
                reason=REASON_READY,
                now=now,
                generation=generation,
            )
        failed = any(c is not None and c.status is ConditionStatus.FALSE for _, c in pending)
        return with_condition(
            conditions,
            self.root,
            ConditionStatus.FALSE if failed else ConditionStatus.UNKNOWN,
            reason=REASON_UNHEALTHY_DEPENDENTS,
            message=self._describe(pending),
            now=now,
            generation=generation,
        )

    def is_ready(self, conditions: Sequence[Condition]) -> bool:
        """Whether the root condition is True."""
        return is_true(conditions, self.root)

    def _describe(self, pending: list[tuple[str, Condition | None]]) -> str:
        if self.summary is Summary.BRIEF:
            return ", ".join(f"{kind} is not True" for kind, _ in pending)
        return "; ".join(
            f"{kind}={ConditionStatus.UNKNOWN if c is None else c.status} "
            f"({'' if c is None else c.reason}: {'' if c is None else c.message})"
            for kind, c in pending
        )
