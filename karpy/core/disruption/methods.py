"""Disruption methods: from candidates to commands. Pure (no I/O, no clock: `now` is an input).

Each method is a small object behind one Protocol, `Method`. The disruption controller selects
candidates (karpy.core.disruption.candidates), computes each NodePool's budget allowance for the
method's reason, and asks the methods in Karpenter's order — Emptiness, StaticDrift, Drift,
then consolidation (karpy.core.disruption.consolidation) — keeping the commands of the first
one that yields any. A command names the NodeClaims to remove and what to create first:
replacement NodeClaims planned by the scheduler (`Simulate`), or, for a static NodePool,
NodeClaims straight from its template.

Replacement planning needs the scheduler and a picture of the cluster without the candidates;
the controller builds that and hands it in as `simulate`, a pure function of the candidates, so
the methods stay pure and testable with a stub.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Protocol

import attrs

from karpy.core.disruption.budgets import Allowance
from karpy.core.disruption.candidates import Candidate, Skip, SkipReason
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.results import NodeClaimPlan


class Reason(enum.StrEnum):
    """Voluntary disruption reasons, as NodePool budgets and Karpenter's metrics name them."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"


class Decision(enum.StrEnum):
    """What a command does with its candidates."""

    DELETE = "delete"
    REPLACE = "replace"


class Kind(enum.StrEnum):
    """Which method a command comes from, by Karpenter's name for it: the queue, the metrics
    and the validation step tell commands apart by this, never by a string."""

    EMPTINESS = "emptiness"
    STATIC_DRIFT = "static-drift"
    DRIFT = "drift"
    MULTI_NODE_CONSOLIDATION = "multi-node-consolidation"
    SINGLE_NODE_CONSOLIDATION = "single-node-consolidation"

    @property
    def consolidation(self) -> bool:
        """Whether commands of this kind are consolidation's (validated after a delay)."""
        return self in (Kind.MULTI_NODE_CONSOLIDATION, Kind.SINGLE_NODE_CONSOLIDATION)

    @property
    def consolidation_type(self) -> str:
        """Karpenter's consolidation_type metric label: "multi", "single" or "" for others."""
        return self.value.split("-", 1)[0] if self.consolidation else ""


@attrs.frozen
class Offer:
    """One way to buy a planned replacement: an instance type in a zone and capacity type, at a
    price per hour."""

    instance_type: str
    capacity_type: str
    zone: str
    price: float


@attrs.frozen(kw_only=True)
class Simulation:
    """Where the candidates' pods would go without them: new NodeClaims to create first, and
    the pods that would fit nowhere (`namespace/name: why`). `offers[i]` lists every offering
    `plans[i]`'s requirements allow (consolidation prices replacements from it)."""

    plans: tuple[NodeClaimPlan, ...] = ()
    unplaced: tuple[str, ...] = ()
    offers: tuple[tuple[Offer, ...], ...] = ()


Simulate = Callable[[Sequence[Candidate]], Simulation]


def offers(
    plan: NodeClaimPlan, instance_types: Mapping[str, Sequence[InstanceType]]
) -> tuple[Offer, ...]:
    """Every available offering of `plan`'s instance types (its NodePool's, by name in
    `instance_types`) its requirements allow: what a simulation answers for each plan."""
    by_name = {it.name: it for it in instance_types.get(plan.nodepool, ())}
    return tuple(
        Offer(it.name, o.capacity_type, o.zone, o.price)
        for it in (by_name[n] for n in plan.instance_types if n in by_name)
        for o in it.offerings
        if o.available and o.matches(plan.requirements)
    )


@attrs.frozen(kw_only=True)
class Command:
    """Remove `candidates` once `replacements` (and `from_template` NodeClaims from each
    candidate's NodePool template) are Initialized."""

    method: Kind
    reason: Reason
    candidates: tuple[Candidate, ...]
    replacements: tuple[NodeClaimPlan, ...] = ()
    from_template: int = 0

    @property
    def decision(self) -> Decision:
        return Decision.REPLACE if self.replacements or self.from_template else Decision.DELETE

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)


@attrs.frozen(kw_only=True)
class MethodInput:
    """What a method decides from: the candidates (cheapest to disrupt first), each NodePool's
    allowance for the method's reason, the time, and the scheduling simulation. `relaxed` is the
    simulation consolidation uses when given: it relaxes preferred affinities and spreads when
    that needs fewer new nodes (None: `simulate`)."""

    candidates: tuple[Candidate, ...]
    allowances: Mapping[str, Allowance]
    now: float
    simulate: Simulate
    relaxed: Simulate | None = None
    cleared: frozenset[str] = frozenset()
    """Candidates single-node consolidation already simulated, without a command, on this same
    cluster state (an earlier pass the caller remembers): not simulated again."""


@attrs.frozen(kw_only=True)
class Outcome:
    """A method's commands, and the candidates it considered but left alone (with why).

    `examined` names the candidates single-node consolidation simulated without a command;
    `complete` is False when it stopped at its simulation limit before seeing every candidate.
    """

    commands: tuple[Command, ...] = ()
    skipped: tuple[Skip, ...] = ()
    examined: frozenset[str] = frozenset()
    complete: bool = True


class Method(Protocol):
    """One disruption method."""

    name: ClassVar[Kind]
    reason: ClassVar[Reason]

    def compute(self, given: MethodInput) -> Outcome:
        """The commands to run now (none when the method has nothing to do)."""
        ...


def _skip(candidate: Candidate, reason: SkipReason, message: str) -> Skip:
    return Skip(nodeclaim=candidate.name, node=candidate.facts.node, reason=reason, message=message)


def _budget_skip(candidate: Candidate, grant: Allowance | None, reason: Reason) -> Skip:
    if grant is not None and grant.error is not None:
        message = f"nodepool {candidate.nodepool} has an invalid disruption budget: {grant.error}"
    else:
        message = (
            f"no allowed disruptions for disruption reason {reason.value} due to blocking "
            f"budget in nodepool {candidate.nodepool}"
        )
    return _skip(candidate, SkipReason.BUDGET, message)


class Budget:
    """Allowances being spent within one method's pass: the one place a disruption is counted
    against its NodePool's budget (every method, and consolidation's validation, spend here)."""

    def __init__(self, allowances: Mapping[str, Allowance], reason: Reason) -> None:
        self._allowances = allowances
        self._left = {pool: grant.allowed for pool, grant in allowances.items()}
        self._reason = reason

    def blocked(self, candidate: Candidate) -> Skip | None:
        """Why the candidate's pool cannot spend another disruption now, if it cannot."""
        if self._left.get(candidate.nodepool, 0) <= 0:
            return _budget_skip(candidate, self._allowances.get(candidate.nodepool), self._reason)
        return None

    def take(self, candidate: Candidate) -> Skip | None:
        """Spend one disruption of the candidate's pool, or say why it cannot."""
        skip = self.blocked(candidate)
        if skip is None:
            self._left[candidate.nodepool] -= 1
        return skip

    def within(self, candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[Skip]]:
        """Spend one disruption for each of `candidates` in order: those the budgets allow,
        and a budget skip for each of the rest."""
        kept: list[Candidate] = []
        skipped: list[Skip] = []
        for candidate in candidates:
            skip = self.take(candidate)
            if skip is None:
                kept.append(candidate)
            else:
                skipped.append(skip)
        return kept, skipped


def consolidatable(candidate: Candidate) -> Skip | None:
    """Why `candidate` is not Consolidatable now, if it is not: its NodePool's consolidateAfter
    must be set and valid, and its NodeClaim's `Consolidatable` condition True (read, not
    recomputed: the condition says consolidateAfter has passed since its last pod event)."""
    pool = candidate.pool
    if pool.error is not None:
        return _skip(candidate, SkipReason.INVALID_CONSOLIDATE_AFTER, pool.error)
    if pool.consolidate_after is None:
        return _skip(candidate, SkipReason.CONSOLIDATION_DISABLED, "consolidateAfter is Never")
    if not candidate.facts.consolidatable:
        return _skip(
            candidate,
            SkipReason.NOT_CONSOLIDATABLE,
            f"node has had pod events within consolidateAfter ({pool.consolidate_after:g}s)",
        )
    return None


@attrs.frozen
class Emptiness:
    """Delete every Consolidatable node with no reschedulable pod, in one command, within the
    `Empty` budgets; longest-empty first. Applies to every consolidation policy; not to static
    NodePools (their size is fixed)."""

    name: ClassVar[Kind] = Kind.EMPTINESS
    reason: ClassVar[Reason] = Reason.EMPTY

    def compute(self, given: MethodInput) -> Outcome:
        skipped: list[Skip] = []
        ready: list[Candidate] = []
        for candidate in given.candidates:
            if not candidate.facts.empty or candidate.pool.static:
                continue
            skip = consolidatable(candidate)
            if skip is not None:
                skipped.append(skip)
            else:
                ready.append(candidate)
        ready.sort(key=lambda c: (c.facts.quiet_since or given.now, c.name))
        budget = Budget(given.allowances, self.reason)
        chosen: list[Candidate] = []
        for candidate in ready:
            skip = budget.take(candidate)
            if skip is None:
                chosen.append(candidate)
            else:
                skipped.append(skip)
        if not chosen:
            return Outcome(skipped=tuple(skipped))
        command = Command(method=self.name, reason=self.reason, candidates=tuple(chosen))
        return Outcome(commands=(command,), skipped=tuple(skipped))


def _drifted(candidates: Sequence[Candidate], *, static: bool) -> list[Candidate]:
    return [c for c in candidates if c.facts.drifted is not None and c.pool.static == static]


@attrs.frozen
class StaticDrift:
    """Replace drifted NodeClaims of static NodePools (`spec.replicas`) one for one, each with a
    NodeClaim from the pool's template, within the `Drifted` budgets."""

    name: ClassVar[Kind] = Kind.STATIC_DRIFT
    reason: ClassVar[Reason] = Reason.DRIFTED

    def compute(self, given: MethodInput) -> Outcome:
        budget = Budget(given.allowances, self.reason)
        commands: list[Command] = []
        skipped: list[Skip] = []
        for candidate in _drifted(given.candidates, static=True):
            skip = budget.take(candidate)
            if skip is not None:
                skipped.append(skip)
                continue
            commands.append(
                Command(
                    method=self.name,
                    reason=self.reason,
                    candidates=(candidate,),
                    from_template=1,
                )
            )
        return Outcome(commands=tuple(commands), skipped=tuple(skipped))


@attrs.frozen
class Drift:
    """Replace drifted NodeClaims of dynamic NodePools within the `Drifted` budgets: every empty
    one in a single delete command if there are any; otherwise the cheapest-to-disrupt node whose
    pods all fit elsewhere or on new NodeClaims, one command per pass, replacement first."""

    name: ClassVar[Kind] = Kind.DRIFT
    reason: ClassVar[Reason] = Reason.DRIFTED

    def compute(self, given: MethodInput) -> Outcome:
        drifted = _drifted(given.candidates, static=False)
        budget = Budget(given.allowances, self.reason)
        skipped: list[Skip] = []
        empty: list[Candidate] = []
        for candidate in (c for c in drifted if c.facts.empty):
            skip = budget.take(candidate)
            if skip is None:
                empty.append(candidate)
            else:
                skipped.append(skip)
        if empty:
            command = Command(method=self.name, reason=self.reason, candidates=tuple(empty))
            return Outcome(commands=(command,), skipped=tuple(skipped))
        for candidate in (c for c in drifted if not c.facts.empty):
            skip = budget.blocked(candidate)
            if skip is not None:
                skipped.append(skip)
                continue
            simulation = given.simulate((candidate,))
            if simulation.unplaced:
                skipped.append(
                    _skip(
                        candidate,
                        SkipReason.UNSCHEDULABLE,
                        f"{len(simulation.unplaced)} pod(s) would not schedule: "
                        f"{simulation.unplaced[0]}",
                    )
                )
                continue
            command = Command(
                method=self.name,
                reason=self.reason,
                candidates=(candidate,),
                replacements=simulation.plans,
            )
            return Outcome(commands=(command,), skipped=tuple(skipped))
        return Outcome(skipped=tuple(skipped))


@attrs.frozen(kw_only=True)
class Pass:
    """One disruption pass: the method that acted (None when none did), its commands, and
    every candidate the methods tried considered and left alone."""

    method: Kind | None
    commands: tuple[Command, ...]
    skipped: tuple[Skip, ...]
    by_method: tuple[tuple[Kind, tuple[Skip, ...]], ...] = ()
    """The same skips, per method asked, in the order asked."""
    examined: frozenset[str] = frozenset()
    """Candidates the methods simulated without a command (`Outcome.examined`)."""
    complete: bool = True
    """False when a method stopped at its simulation limit (`Outcome.complete`)."""


def decide(
    methods: Sequence[Method],
    candidates: Sequence[Candidate],
    allowances: Callable[[Reason], Mapping[str, Allowance]],
    *,
    now: float,
    simulate: Simulate,
    relaxed: Simulate | None = None,
    cleared: frozenset[str] = frozenset(),
) -> Pass:
    """Ask `methods` in order; the first that yields commands wins the pass.

    `allowances(reason)` gives each NodePool's budget allowance for a reason; `cleared` is
    passed on (`MethodInput.cleared`).
    """
    skipped: list[Skip] = []
    by_method: list[tuple[Kind, tuple[Skip, ...]]] = []
    examined: set[str] = set()
    complete = True
    for method in methods:
        outcome = method.compute(
            MethodInput(
                candidates=tuple(candidates),
                allowances=allowances(method.reason),
                now=now,
                simulate=simulate,
                relaxed=relaxed,
                cleared=cleared,
            )
        )
        skipped.extend(outcome.skipped)
        by_method.append((method.name, outcome.skipped))
        examined.update(outcome.examined)
        complete = complete and outcome.complete
        if outcome.commands:
            return Pass(
                method=method.name,
                commands=outcome.commands,
                skipped=tuple(skipped),
                by_method=tuple(by_method),
                examined=frozenset(examined),
                complete=complete,
            )
    return Pass(
        method=None,
        commands=(),
        skipped=tuple(skipped),
        by_method=tuple(by_method),
        examined=frozenset(examined),
        complete=complete,
    )
