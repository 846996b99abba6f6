"""Emptiness: which empty NodeClaims to delete now, within budgets. Pure (no I/O, no clock: `now`
is a parameter, in UTC epoch seconds like every time here).

Karpenter's first disruption method. A candidate must be managed (carry the nodepool label, with
the NodePool present), Initialized, not already deleting, not nominated for pending pods, not
annotated `karpenter.sh/do-not-disrupt: "true"`, in a pool with consolidateAfter not Never
(emptiness applies to every consolidation policy: WhenEmpty, WhenEmptyOrUnderutilized,
Balanced), and have had no reschedulable pod for at least consolidateAfter since
max(lastPodEventTime, Initialized).
Chosen candidates are then capped per pool by the `Empty` budget allowance, counting NodeClaims
already being deleted. Every candidate left out gets a reason, so the caller can explain itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from karpy.core.disruption.budgets import Allowance, BudgetSpec, allowance

REASON_EMPTY: Final = "Empty"
"""The budget reason emptiness is limited by (NodePool `budgets[].reasons`)."""


@attrs.frozen(kw_only=True)
class PoolDisruption:
    """A NodePool's disruption settings as the core sees them.

    `consolidate_after` is in seconds, None for Never. `error` carries a translation failure
    (an unparsable consolidateAfter): the pool's nodes are then left alone.
    """

    consolidate_after: float | None
    budgets: tuple[BudgetSpec, ...] = (BudgetSpec(),)
    error: str | None = None


@attrs.frozen(kw_only=True)
class Candidate:
    """One NodeClaim as emptiness sees it. The caller reads these facts from cluster state.

    `reschedulable_pods` counts pods bound to the node other than DaemonSet-owned, mirror,
    terminal or terminating pods. `initialized_at` is None until the NodeClaim is Initialized.
    `nominated` marks a node that pods are expected to land on (it is not disrupted yet).
    """

    nodeclaim: str
    node: str | None
    nodepool: str | None
    initialized_at: float | None
    last_pod_event_time: float | None
    deleting: bool
    do_not_disrupt: bool
    reschedulable_pods: int
    nominated: bool = False


class SkipReason(enum.StrEnum):
    """Why a NodeClaim was not chosen."""

    UNMANAGED = "Unmanaged"
    NODEPOOL_NOT_FOUND = "NodePoolNotFound"
    NOT_INITIALIZED = "NotInitialized"
    DELETING = "Deleting"
    DO_NOT_DISRUPT = "DoNotDisrupt"
    NOMINATED = "Nominated"
    CONSOLIDATION_DISABLED = "ConsolidateAfterNever"
    INVALID_CONSOLIDATE_AFTER = "InvalidConsolidateAfter"
    NOT_EMPTY = "NotEmpty"
    NOT_CONSOLIDATABLE = "NotConsolidatable"
    BUDGET = "Budget"


@attrs.frozen(kw_only=True)
class Skip:
    """A NodeClaim left alone, with the reason and a one-line explanation."""

    nodeclaim: str
    reason: SkipReason
    message: str


@attrs.frozen(kw_only=True)
class Decision:
    """The NodeClaims to delete (oldest-empty first), every skip, and each pool's allowance."""

    delete: tuple[Candidate, ...]
    skipped: tuple[Skip, ...]
    allowances: Mapping[str, Allowance]


def _since(candidate: Candidate) -> float | None:
    stamps = [t for t in (candidate.initialized_at, candidate.last_pod_event_time) if t is not None]
    return max(stamps) if stamps else None


def _ineligible(
    candidate: Candidate, pools: Mapping[str, PoolDisruption], *, now: float
) -> Skip | None:
    """The reason `candidate` cannot be deleted for emptiness regardless of budgets, if any."""

    def skip(reason: SkipReason, message: str) -> Skip:
        return Skip(nodeclaim=candidate.nodeclaim, reason=reason, message=message)

    if candidate.nodepool is None:
        return skip(SkipReason.UNMANAGED, "nodeclaim has no karpenter.sh/nodepool label")
    disruption = pools.get(candidate.nodepool)
    if disruption is None:
        return skip(SkipReason.NODEPOOL_NOT_FOUND, f"nodepool {candidate.nodepool} not found")
    if candidate.deleting:
        return skip(SkipReason.DELETING, "nodeclaim is already being deleted")
    if candidate.initialized_at is None or candidate.node is None:
        return skip(SkipReason.NOT_INITIALIZED, "nodeclaim is not initialized")
    if candidate.do_not_disrupt:
        return skip(
            SkipReason.DO_NOT_DISRUPT, "disruption is blocked by karpenter.sh/do-not-disrupt"
        )
    if candidate.nominated:
        return skip(SkipReason.NOMINATED, "node is nominated for pending pods")
    if disruption.error is not None:
        return skip(SkipReason.INVALID_CONSOLIDATE_AFTER, disruption.error)
    after = disruption.consolidate_after
    if after is None:
        return skip(SkipReason.CONSOLIDATION_DISABLED, "consolidateAfter is Never")
    if candidate.reschedulable_pods > 0:
        return skip(SkipReason.NOT_EMPTY, f"node has {candidate.reschedulable_pods} pod(s)")
    since = _since(candidate)
    if since is None or now - since < after:
        return skip(
            SkipReason.NOT_CONSOLIDATABLE,
            f"consolidateAfter {after:g}s has not passed since "
            "the last pod event or initialization",
        )
    return None


def decide(
    candidates: Sequence[Candidate], pools: Mapping[str, PoolDisruption], *, now: float
) -> Decision:
    """Choose the empty NodeClaims to delete at `now`.

    `candidates` must hold every NodeClaim (deleting ones included: they count against budgets);
    `pools` maps NodePool name to its disruption settings.
    """
    skipped: list[Skip] = []
    eligible: dict[str, list[Candidate]] = {}
    totals: dict[str, int] = {}
    deleting: dict[str, int] = {}
    for candidate in candidates:
        if candidate.nodepool is not None:
            totals[candidate.nodepool] = totals.get(candidate.nodepool, 0) + 1
            if candidate.deleting:
                deleting[candidate.nodepool] = deleting.get(candidate.nodepool, 0) + 1
        reason = _ineligible(candidate, pools, now=now)
        if reason is not None:
            skipped.append(reason)
        else:
            eligible.setdefault(candidate.nodepool or "", []).append(candidate)
    chosen: list[Candidate] = []
    allowances: dict[str, Allowance] = {}
    for pool in sorted(eligible):
        grant = allowance(
            pools[pool].budgets,
            reason=REASON_EMPTY,
            total=totals[pool],
            disrupting=deleting.get(pool, 0),
            now=now,
        )
        allowances[pool] = grant
        ordered = sorted(eligible[pool], key=lambda c: (_since(c) or now, c.nodeclaim))
        chosen.extend(ordered[: grant.allowed])
        for candidate in ordered[grant.allowed :]:
            message = grant.error or (
                f"budget for nodepool {pool} allows {grant.limit} disrupting, "
                f"{grant.disrupting} already are"
            )
            skipped.append(
                Skip(nodeclaim=candidate.nodeclaim, reason=SkipReason.BUDGET, message=message)
            )
    return Decision(delete=tuple(chosen), skipped=tuple(skipped), allowances=allowances)
