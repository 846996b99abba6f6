"""One disruption pass, end to end and pure: facts in, commands out.

`disrupt` is what the disruption controller runs off the event loop each pass: select the
candidates, count each NodePool's NodeClaims the way budgets count them, compute the allowance
per NodePool and reason, and ask the methods in order. Tests and properties drive the same
function, so what they check is what runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from karpy.core.disruption.budgets import Allowance, PoolCount, allowances
from karpy.core.disruption.candidates import (
    NodeFacts,
    Policy,
    PoolDisruption,
    Selection,
    Skip,
    SkipReason,
    select,
)
from karpy.core.disruption.consolidation import (
    FixedPointConsolidation,
    MultiNodeConsolidation,
    Settings,
    SingleNodeConsolidation,
    validate,
)
from karpy.core.disruption.methods import (
    Command,
    Drift,
    Emptiness,
    Method,
    MethodInput,
    Pass,
    Reason,
    Simulate,
    StaticDrift,
    consolidatable,
    decide,
)


def disruption_methods(settings: Settings | None = None) -> tuple[Method, ...]:
    """The disruption methods in Karpenter's order (the first that yields commands wins a
    pass), consolidation with `settings`: the one list the controller, `karpy explain`,
    `karpy simulate --consolidate` and the benchmarks ask."""
    settings = settings or Settings()
    return (
        Emptiness(),
        StaticDrift(),
        Drift(),
        MultiNodeConsolidation(settings),
        SingleNodeConsolidation(settings),
        FixedPointConsolidation(settings),
    )


@attrs.frozen(kw_only=True)
class PassResult:
    """A pass: the candidates and who was left out, the allowances it decided within, and the
    method's commands."""

    selection: Selection
    allowances: Mapping[Reason, Mapping[str, Allowance]]
    outcome: Pass
    kept: tuple[Skip, ...] = ()
    """Consolidation's answer to "why was this node not consolidated?": one reason per NodeClaim
    it looked at and left alone (see `unconsolidatable`), by NodeClaim name."""

    def reason_for(self, name: str) -> Skip | None:
        """The reason consolidation left NodeClaim or Node `name` alone, if it did."""
        return next((k for k in self.kept if name in (k.nodeclaim, k.node)), None)


def pool_counts(nodes: Iterable[NodeFacts]) -> dict[str, PoolCount]:
    """Each NodePool's managed, Initialized NodeClaims and how many of them are disrupting
    (deleting, in a command, or NotReady), as Karpenter's budgets count them."""
    totals: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for f in nodes:
        if not f.managed or f.nodepool is None:
            continue
        totals[f.nodepool] = totals.get(f.nodepool, 0) + 1
        if f.deleting or f.disrupting or not f.ready:
            disrupting[f.nodepool] = disrupting.get(f.nodepool, 0) + 1
    return {
        pool: PoolCount(total=total, disrupting=disrupting.get(pool, 0))
        for pool, total in totals.items()
    }


def pool_allowances(
    counts: Mapping[str, PoolCount],
    pools: Mapping[str, PoolDisruption],
    reason: Reason,
    *,
    now: float,
) -> dict[str, Allowance]:
    """Each NodePool's allowance for `reason` at `now`, from its budgets and its `counts`
    (`pool_counts`): what a pass, its fingerprint and a validation all decide within."""
    budgets = {name: pool.budgets for name, pool in pools.items()}
    return allowances(budgets, counts, reason=reason.value, now=now)


SELECTION_BLOCKS = frozenset(
    {SkipReason.DO_NOT_DISRUPT, SkipReason.POD_DO_NOT_DISRUPT, SkipReason.PDB}
)
"""Reasons a node is no candidate at all that consolidation reports as its own."""


def unconsolidatable(
    nodes: Sequence[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    selection: Selection,
    outcome: Pass,
    methods: Sequence[Method],
) -> tuple[Skip, ...]:
    """One reason per NodeClaim consolidation looked at and left alone, sorted by name.

    A node with pods in a dynamic NodePool that consolidates underutilized nodes, kept out of
    the candidates by do-not-disrupt or a PodDisruptionBudget, is left alone for that reason.
    Otherwise the reason is the one the consolidation methods gave: single-node's (which looks
    at each candidate on its own) over multi-node's (which may only have seen a budget). A
    NodeClaim in one of the pass's commands has no reason; nor has one the pass did not look at
    (another method acted first, or a better command was found before reaching it).
    """
    by_name = {f.nodeclaim: f for f in nodes}
    found: dict[str, Skip] = {}
    for skip in selection.skipped:
        facts = by_name.get(skip.nodeclaim)
        pool = pools.get(facts.nodepool or "") if facts is not None else None
        if (
            skip.reason in SELECTION_BLOCKS
            and facts is not None
            and pool is not None
            and not facts.empty
            and not pool.static
            and pool.policy is not Policy.WHEN_EMPTY
        ):
            found[skip.nodeclaim] = skip
    underutilized = {m.name for m in methods if m.reason is Reason.UNDERUTILIZED}
    for name, skips in outcome.by_method:
        if name in underutilized:
            for skip in skips:
                found[skip.nodeclaim] = skip
    acting = {n for command in outcome.commands for n in command.names}
    return tuple(found[n] for n in sorted(found) if n not in acting)


def disrupt(
    nodes: Sequence[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    *,
    now: float,
    simulate: Simulate,
    methods: Sequence[Method] | None = None,
    relaxed: Simulate | None = None,
    cleared: frozenset[str] = frozenset(),
) -> PassResult:
    """One pass over `nodes` (every NodeClaim in the cluster) and the live `pools`; `cleared`
    names candidates single-node consolidation need not simulate again (`MethodInput`);
    `methods` defaults to `disruption_methods()`."""
    methods = disruption_methods() if methods is None else methods
    selection = select(nodes, pools, now=now)
    counts = pool_counts(nodes)
    by_reason = {reason: pool_allowances(counts, pools, reason, now=now) for reason in Reason}
    outcome = decide(
        methods,
        selection.candidates,
        by_reason.__getitem__,
        now=now,
        simulate=simulate,
        relaxed=relaxed,
        cleared=cleared,
    )
    kept = unconsolidatable(nodes, pools, selection, outcome, methods)
    return PassResult(selection=selection, allowances=by_reason, outcome=outcome, kept=kept)


def fingerprint(
    nodes: Sequence[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    selection: Selection,
    *,
    now: float,
) -> int:
    """A hash of what a pass decides from, as far as facts tell it: every NodeClaim's facts,
    the pools' disruption settings (whether a NodeClaim is Consolidatable is a fact, its
    condition), and what the time changes — which NodeClaims are candidates (do-not-disrupt
    durations run out) and the Underutilized allowances (budget schedules open and close).
    Two passes with the same fingerprint, and the same simulation inputs the caller adds (pods,
    nodes, NodePools), decide the same, so a caller may skip consolidation a pass already found
    nothing in.
    `selection` is `select(nodes, pools, now=now)`, which the caller has made already."""
    ready = tuple(c.name for c in selection.candidates if consolidatable(c) is None)
    grants = pool_allowances(pool_counts(nodes), pools, Reason.UNDERUTILIZED, now=now)
    return hash(
        (
            tuple(nodes),
            tuple(sorted(pools.items())),
            ready,
            tuple(sorted((pool, grant.allowed, grant.error) for pool, grant in grants.items())),
        )
    )


def revalidate(
    command: Command,
    nodes: Sequence[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    *,
    now: float,
    simulate: Simulate,
    spot_to_spot: bool,
) -> Command | str:
    """A consolidation command re-checked against a fresh read of the cluster (after the
    validation delay): the command to run, or why it is dropped."""
    selection = select(nodes, pools, now=now)
    grants = pool_allowances(pool_counts(nodes), pools, command.reason, now=now)
    given = MethodInput(
        candidates=selection.candidates, allowances=grants, now=now, simulate=simulate
    )
    return validate(command, given, spot_to_spot=spot_to_spot)


CONSOLIDATED_TTL: Final = 300.0
"""How long a pass that found nothing to consolidate stands while the cluster is unchanged
(Karpenter re-checks a consolidated cluster every five minutes; prices may move meanwhile)."""


class Memo:
    """What consolidation already found on the current cluster state (Karpenter's
    "consolidated" mark): candidates single-node consolidation simulated without a command
    (`cleared`, not simulated again), and whether a whole pass found nothing (`settled`:
    consolidation is skipped until the state changes or `CONSOLIDATED_TTL` passes). A large
    fleet whose single-node search stops at its simulation limit clears its candidates over
    several passes, then settles. The controller keeps one across passes; `karpy simulate
    --consolidate` and the consolidation benchmark keep one across the passes of their loop."""

    def __init__(self) -> None:
        self._state: int | None = None
        self.cleared: frozenset[str] = frozenset()
        self._settled_at: float | None = None

    @property
    def settled_until(self) -> float | None:
        """Until when the last settling stands (`CONSOLIDATED_TTL` after it), if one does."""
        return None if self._settled_at is None else self._settled_at + CONSOLIDATED_TTL

    def settled(self, state: int, now: float) -> bool:
        """Whether this pass may skip consolidation: a complete pass found nothing on this same
        `state` less than `CONSOLIDATED_TTL` ago. A new state forgets everything; so does the
        TTL running out, so that the pass after it simulates every candidate again."""
        expired = self._settled_at is not None and now - self._settled_at >= CONSOLIDATED_TTL
        if state != self._state or expired:
            self._state, self.cleared, self._settled_at = state, frozenset(), None
        return self._settled_at is not None

    def record(self, outcome: Pass, now: float) -> None:
        """What a pass that ran consolidation found: a command forgets everything (the cluster
        is about to change); nothing adds the candidates it simulated to `cleared`, and settles
        when the pass saw every candidate."""
        if outcome.commands:
            self._state, self.cleared, self._settled_at = None, frozenset(), None
            return
        self.cleared = self.cleared | outcome.examined
        self._settled_at = now if outcome.complete else None
