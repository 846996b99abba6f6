"""Consolidation: remove or replace underutilized nodes when that makes the cluster cheaper.

Two methods run after Emptiness and Drift, as in Karpenter: multi-node consolidation (several
candidates deleted, or replaced by one cheaper node) then single-node consolidation (one
candidate deleted, or replaced by one strictly cheaper node). Both spend the `Underutilized`
budgets and consider only NodePools whose consolidationPolicy is WhenEmptyOrUnderutilized or
Balanced, and nodes whose NodeClaim is Consolidatable (`consolidatable`).

No churn, by construction (`price_replacement`): a replacement keeps only offerings strictly
cheaper than the candidates together (less the NodePool's minimum improvement), never the
instance type and capacity type of a candidate, and one capacity type, so whatever offering the
launch ends up with is cheaper. Every command therefore lowers the fleet's price, and no later
command can undo it. Spot candidates are replaced by spot only behind the
SpotToSpotConsolidation gate, with Karpenter's rule: at least 15 cheaper instance types for a
single node, and only the 15 cheapest are sent (more when minValues needs them).

Two searches pick the candidates (docs/consolidation.md argues the difference):
- `Search.KARPENTER`, Karpenter's: multi-node sorts candidates by disruption cost, takes the
  first 100 and binary-searches the largest prefix (at least two) that consolidates;
  single-node takes the first candidate, in that order interleaved by NodePool, that does.
- `Search.KARPY`: the same disruption-cost order (draining the nodes with the fewest pods
  onto fuller ones is what lowers the bill: ordering by price per unit of disruption drained
  large nodes onto small ones and settled dearer); multi-node binary-searches the largest
  feasible prefix, then tries to add each further candidate (one simulation each, a bounded
  number), keeping it only when the command then saves more, so one immovable node does not
  hide those behind it; single-node deletes before it replaces: the first candidate in that
  order that can be deleted, and only when none of a bounded number can, the first
  replacement, as Karpenter's (replacing the largest saving first refills the spare room of
  medium nodes that can then no longer shrink, and deleting the largest saving first led to
  dearer fixed points too); and when neither finds anything, `FixedPointConsolidation` looks
  past the fixed point for merges the prefix search cannot see (past a price tie, or two
  candidates apart in the order), taking one only when it saves `FIXED_POINT_SHARE` of its
  candidates' price. Where it compares commands, of two equal savings the one moving fewer
  pods wins (`better`).

Pure: `now` and the scheduling simulation are inputs; same input, same commands.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.disruption.candidates import Candidate, Policy, Skip, SkipReason
from karpy.core.disruption.methods import (
    Budget,
    Command,
    Decision,
    Kind,
    MethodInput,
    Offer,
    Outcome,
    Reason,
    Simulate,
    Simulation,
    consolidatable,
)
from karpy.core.pods import Pod
from karpy.core.requirements import Requirement
from karpy.core.scheduling import SchedulerOptions, solve
from karpy.core.scheduling.preferences import PreferencePolicy, has_preferences
from karpy.core.scheduling.results import NodeClaimPlan, Results
from karpy.core.snapshot import ClusterSnapshot

SPOT = "spot"
MIN_SPOT_TO_SPOT_TYPES = 15
"""Karpenter's MinInstanceTypesForSpotToSpotConsolidation."""
MAX_MULTI_CANDIDATES = 100
"""Karpenter's cap on candidates multi-node consolidation considers."""
BALANCED_K = 2.0
"""Balanced: a move must save at least 1/k of the share of disruption it causes."""
FIXED_POINT_SHARE = 0.05
"""Share of its candidates' price a command found past the fixed point must save: the merges
left there save one size step of many nodes while moving every pod on them, and a user pays
those evictions for a saving within rounding of the bill. At 10 % it held back the merge that
brings a plain benchmark fleet (seed 10) to Karpenter's price; 3 % and 5 % both reach it
(benchmarks/README.md has the twenty-seed sweeps)."""
PRICE_TOLERANCE = 1e-6
"""Share of the candidates' price a replacement must save beyond rounding: prices are floats,
and sums of rounded prices differ in the last digits, so "strictly cheaper" without it lets a
price-neutral merge (five nodes into one of their combined size) pass as a saving."""


class Search(enum.StrEnum):
    """How consolidation chooses which candidates to act on."""

    KARPY = "karpy"
    KARPENTER = "karpenter"


@attrs.frozen(kw_only=True)
class Settings:
    """Consolidation options shared by both methods.

    `extend` bounds the extra simulations karpy's multi-node search spends growing its set;
    `pairs`: at a fixed point karpy's search tries every pair of the first `pairs` candidates
    the budgets allow (pairs * (pairs - 1) / 2 simulations at most, `FixedPointConsolidation`);
    `single_probes` bounds the candidates karpy's single-node search compares once one works;
    `single_limit` bounds the simulations single-node spends in one pass with either search
    (Karpenter bounds it by time, three minutes; a count keeps the core free of clocks);
    `fixed_point_share` is the share of its candidates' price a merge found past the fixed
    point must save (`FIXED_POINT_SHARE`).
    """

    search: Search = Search.KARPY
    spot_to_spot: bool = False
    extend: int = 12
    pairs: int = 8
    single_probes: int = 40
    single_limit: int = 50
    fixed_point_share: float = FIXED_POINT_SHARE


@attrs.frozen(kw_only=True)
class Evaluation:
    """What removing a set of candidates would do: a command, or why not (`skip_reason`)."""

    command: Command | None = None
    skip_reason: SkipReason | None = None
    message: str = ""
    priced_out: bool = False
    """The pods fit (the rest of the cluster and at most one new node) but no replacement is
    cheaper: a larger set, with more price to beat, may still consolidate."""

    @property
    def savings(self) -> float:
        if self.command is None:
            return -math.inf
        return savings(self.command)


def parse_min_improvement(text: str, *, source: str) -> float:
    """`"10%"` -> 0.1; raises ValueError naming `source` for anything but 0% <= N < 100%."""
    value = text.strip()
    number = value.removesuffix("%")
    try:
        parsed = float(number)
    except ValueError:
        parsed = math.nan
    if not value.endswith("%") or not 0 <= parsed < 100:
        msg = f"{source}: invalid minimum price improvement {text!r}: expected a percentage 0%-99%"
        raise ValueError(msg)
    return parsed / 100


def candidates_price(candidates: Iterable[Candidate]) -> float | None:
    """The candidates' price per hour together, None when some price is unknown."""
    prices = [c.facts.price for c in candidates]
    if any(p is None for p in prices):
        return None
    return math.fsum(p for p in prices if p is not None)


def savings(command: Command) -> float:
    """Price per hour the command saves (0 when a candidate's price is unknown)."""
    before = candidates_price(command.candidates) or 0.0
    return before - math.fsum(p.price for p in command.replacements)


def moved(command: Command) -> int:
    """Pods the command evicts (its disruption, counted in pods)."""
    return sum(len(c.facts.pods) for c in command.candidates)


def price_replacement(
    plan: NodeClaimPlan,
    offers: Sequence[Offer],
    candidates: Sequence[Candidate],
    *,
    spot_to_spot: bool,
) -> NodeClaimPlan | tuple[SkipReason, str]:
    """`plan` narrowed to offerings that make the command strictly cheaper, or why none do.

    Kept: one capacity type (spot when a cheaper spot offering exists, as Karpenter forces spot
    for an on-demand candidate), and only instance types every allowed offering of which (any
    zone of the plan) costs less than the candidates' price less the largest minimum
    improvement among their NodePools, and differs from every candidate's instance type and
    capacity type.
    """
    total = candidates_price(candidates)
    if total is None:
        unknown = next(c for c in candidates if c.facts.price is None)
        return (
            SkipReason.PRICE_UNKNOWN,
            f"price of instance type {unknown.facts.instance_type} "
            f"({unknown.facts.capacity_type}, {unknown.facts.zone}) is unknown",
        )
    improvement = max(c.pool.min_improvement for c in candidates)
    limit = total * (1.0 - improvement) - total * PRICE_TOLERANCE
    same = {(c.facts.instance_type, c.facts.capacity_type) for c in candidates}
    all_spot = all(c.facts.capacity_type == SPOT for c in candidates)
    usable = [o for o in offers if not (all_spot and not spot_to_spot and o.capacity_type == SPOT)]
    if not usable:
        return (
            SkipReason.SPOT_TO_SPOT,
            "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
        )
    by_type: dict[tuple[str, str], list[Offer]] = {}
    for offer in usable:
        by_type.setdefault((offer.instance_type, offer.capacity_type), []).append(offer)
    cheaper = {
        key: max(o.price for o in group)
        for key, group in by_type.items()
        if key not in same and max(o.price for o in group) < limit
    }
    if not cheaper:
        return _no_cheaper(by_type, same, total=total, limit=limit, improvement=improvement)
    capacity = SPOT if any(ct == SPOT for _, ct in cheaper) else min(cheaper.items())[0][1]
    options = sorted((price, it) for (it, ct), price in cheaper.items() if ct == capacity)
    if all_spot and capacity == SPOT:
        if len(candidates) == 1 and len(options) < MIN_SPOT_TO_SPOT_TYPES:
            return (
                SkipReason.SPOT_TO_SPOT,
                f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance "
                f"type options than the current candidate to consolidate, got {len(options)}",
            )
        requirement = plan.requirements.get(wk.LABEL_INSTANCE_TYPE)
        keep = max(MIN_SPOT_TO_SPOT_TYPES, (requirement.min_values or 0) if requirement else 0)
        options = options[:keep]
    names = frozenset(it for _, it in options)
    requirements = plan.requirements.add(
        Requirement(wk.LABEL_INSTANCE_TYPE, False, names),
        Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset({capacity})),
    )
    return attrs.evolve(
        plan,
        requirements=requirements,
        instance_types=tuple(it for _, it in options),
        capacity_types=(capacity,),
        price=options[0][0],
    )


def _no_cheaper(
    by_type: Mapping[tuple[str, str], Sequence[Offer]],
    same: set[tuple[str | None, str | None]],
    *,
    total: float,
    limit: float,
    improvement: float,
) -> tuple[SkipReason, str]:
    """Why no replacement offering qualifies: only the candidates' own type is cheap enough
    (no churn), the cheaper ones save less than the minimum improvement, or none is cheaper."""
    worst = {key: max(o.price for o in group) for key, group in by_type.items()}
    own = sorted(key for key, price in worst.items() if key in same and price < limit)
    if own and not any(price < total for key, price in worst.items() if key not in same):
        instance_type, capacity_type = own[0]
        return (
            SkipReason.SAME_TYPE,
            f"the only cheaper replacement is the same instance type {instance_type} "
            f"({capacity_type}), which would not change the node",
        )
    others = [price for key, price in worst.items() if key not in same]
    if improvement > 0 and others and min(others) < total:
        return (
            SkipReason.BELOW_IMPROVEMENT,
            f"the cheapest replacement ({min(others):.4f}/h) saves less than the minimum price "
            f"improvement of {improvement:.0%} on {total:.4f}/h",
        )
    return (SkipReason.NOT_CHEAPER, "can't replace with a cheaper node")


def _unplaced_message(unplaced: Sequence[str]) -> str:
    """The scheduler's explanation of the first pod that would fit nowhere (more counted)."""
    more = f" (and {len(unplaced) - 1} more pod(s))" if len(unplaced) > 1 else ""
    return f"{unplaced[0]}{more}"


def evaluate(
    candidates: Sequence[Candidate],
    simulate: Simulate,
    *,
    method: Kind,
    spot_to_spot: bool,
) -> Evaluation:
    """Would removing `candidates` together consolidate? Delete when their pods fit on the rest
    of the cluster, replace when they need exactly one new node and it is strictly cheaper."""
    simulation: Simulation = simulate(candidates)
    if simulation.unplaced:
        return Evaluation(
            skip_reason=SkipReason.UNSCHEDULABLE, message=_unplaced_message(simulation.unplaced)
        )
    if not simulation.plans:
        command = Command(method=method, reason=Reason.UNDERUTILIZED, candidates=tuple(candidates))
        return Evaluation(command=command)
    if len(simulation.plans) > 1:
        return Evaluation(
            skip_reason=SkipReason.NOT_CHEAPER,
            message=f"can't remove without creating {len(simulation.plans)} nodes",
        )
    offers = simulation.offers[0] if simulation.offers else ()
    priced = price_replacement(simulation.plans[0], offers, candidates, spot_to_spot=spot_to_spot)
    if isinstance(priced, tuple):
        return Evaluation(skip_reason=priced[0], message=priced[1], priced_out=True)
    command = Command(
        method=method,
        reason=Reason.UNDERUTILIZED,
        candidates=tuple(candidates),
        replacements=(priced,),
    )
    return Evaluation(command=command)


def _skip(candidate: Candidate, reason: SkipReason, message: str) -> Skip:
    return Skip(nodeclaim=candidate.name, node=candidate.facts.node, reason=reason, message=message)


def eligible(given: MethodInput) -> tuple[list[Candidate], list[Skip]]:
    """Candidates consolidation may act on: a dynamic NodePool that consolidates when
    underutilized, consolidatable now, not empty (Emptiness's business); with why not."""
    found: list[Candidate] = []
    skipped: list[Skip] = []
    for candidate in given.candidates:
        if candidate.pool.static or candidate.facts.empty:
            continue
        if candidate.pool.policy is Policy.WHEN_EMPTY:
            skipped.append(
                _skip(
                    candidate,
                    SkipReason.POLICY,
                    f"nodepool {candidate.nodepool} has consolidationPolicy WhenEmpty",
                )
            )
            continue
        skip = consolidatable(candidate)
        if skip is not None:
            skipped.append(skip)
            continue
        found.append(candidate)
    return found, skipped


def balanced(command: Command, pool_candidates: Sequence[Candidate]) -> bool:
    """Balanced policy: the share of its NodePool's price a command saves must be at least 1/k
    of the share of its disruption cost it causes (always true for other policies)."""
    pools = {c.nodepool for c in command.candidates if c.pool.policy is Policy.BALANCED}
    if not pools:
        return True
    ours = [c for c in pool_candidates if c.nodepool in pools]
    price = candidates_price(ours) or 0.0
    cost = math.fsum(c.cost for c in ours)
    if price <= 0:
        return False
    saved = savings(command) / price
    disrupted = math.fsum(c.cost for c in command.candidates) / cost if cost > 0 else 0.0
    return saved * BALANCED_K >= disrupted


def _preferred(command: Command, best: Command | None) -> bool:
    """karpy's single-node choice: does `command`, found after `best` in disruption-cost order,
    beat it? Only a deletion beats a replacement; otherwise the first found wins, as in
    Karpenter's. A deletion packs pods into room the fleet already pays for; a replacement buys
    a node sized for the pods it moves, and taken before the deletions it uses up room they
    would have filled. Ranking deletions by saving per disruption instead of taking the first
    (deleting a large lightly used node before a small one) moved fewer pods per command but
    changed which fixed point the fleet settled at, and ended a diverse benchmark fleet dearer
    than Karpenter's search; replacing the largest saving first ended six of twenty 0.5-1.5 %
    dearer."""
    if best is None:
        return True
    return bool(best.replacements) and not command.replacements


def interleave(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Karpenter's single-node order: round robin over NodePools, each in the given order."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_pool.setdefault(candidate.nodepool, []).append(candidate)
    queues = [by_pool[p] for p in sorted(by_pool)]
    out: list[Candidate] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def better(a: Command, b: Command | None) -> bool:
    """Is `a` a better command than `b`: more saved, then fewer pods moved. Savings within
    rounding of each other (`same_saving`) are the same: five nodes merged into one and two
    nodes merged into one may save the same size step, and the one moving fewer pods wins."""
    if b is None:
        return True
    if same_saving(savings(a), savings(b)):
        return moved(a) < moved(b)
    return savings(a) > savings(b)


def same_saving(a: float, b: float) -> bool:
    """Two savings equal but for float rounding (prices are sums of rounded floats)."""
    return math.isclose(a, b, rel_tol=PRICE_TOLERANCE, abs_tol=1e-9)


def _prefix_search(
    ordered: Sequence[Candidate],
    simulate: Simulate,
    *,
    method: Kind,
    spot_to_spot: bool,
    past_ties: bool = False,
) -> tuple[Command | None, int]:
    """Karpenter's binary search for the largest prefix (at least two) that consolidates;
    returns the command and the prefix length it covers (0 for none).

    The search assumes a prefix that does not consolidate makes every longer one fail. That
    holds when its pods do not fit (more pods, fewer nodes to put them on), not when they fit
    and the replacement merely costs no less: four half-used nodes may merge into one of their
    combined price, six into one cheaper than theirs. With `past_ties` (karpy's search) such a
    probe sends the search on to longer prefixes, and the best command probed
    (`better`) is kept instead of the longest."""
    if len(ordered) < 2:
        return None, 0
    low, high = 1, len(ordered) - 1
    best: Command | None = None
    size = 0
    while low <= high:
        mid = (low + high) // 2
        found = evaluate(ordered[: mid + 1], simulate, method=method, spot_to_spot=spot_to_spot)
        if found.command is not None:
            if not past_ties or better(found.command, best):
                best, size = found.command, mid + 1
            low = mid + 1
        elif past_ties and found.priced_out:
            low = mid + 1
        else:
            high = mid - 1
    return best, size


@attrs.frozen
class MultiNodeConsolidation:
    """Delete several candidates at once, or replace them with one cheaper node."""

    settings: Settings = Settings()
    name: ClassVar[Kind] = Kind.MULTI_NODE_CONSOLIDATION
    reason: ClassVar[Reason] = Reason.UNDERUTILIZED

    def compute(self, given: MethodInput) -> Outcome:
        found, skipped = eligible(given)
        spot = self.settings.spot_to_spot
        given = attrs.evolve(given, simulate=given.relaxed or given.simulate)
        ordered, blocked = Budget(given.allowances, self.reason).within(found)
        ordered = ordered[:MAX_MULTI_CANDIDATES]
        command, size = _prefix_search(ordered, given.simulate, method=self.name, spot_to_spot=spot)
        if self.settings.search is Search.KARPY and size:
            # Grow the set past the prefix: one immovable node no longer hides those behind it.
            chosen = list(ordered[:size])
            for candidate in ordered[size : size + self.settings.extend]:
                trial = evaluate(
                    [*chosen, candidate], given.simulate, method=self.name, spot_to_spot=spot
                )
                if trial.command is not None and better(trial.command, command):
                    command = trial.command
                    chosen.append(candidate)
        if command is not None and not balanced(command, found):
            command = None
        skipped.extend(blocked)
        if command is None:
            return Outcome(skipped=tuple(skipped))
        return Outcome(commands=(command,), skipped=tuple(skipped))


@attrs.frozen
class SingleNodeConsolidation:
    """Delete one candidate, or replace it with one strictly cheaper node."""

    settings: Settings = Settings()
    name: ClassVar[Kind] = Kind.SINGLE_NODE_CONSOLIDATION
    reason: ClassVar[Reason] = Reason.UNDERUTILIZED

    def compute(self, given: MethodInput) -> Outcome:
        found, skipped = eligible(given)
        spot = self.settings.spot_to_spot
        given = attrs.evolve(given, simulate=given.relaxed or given.simulate)
        budget = Budget(given.allowances, self.reason)
        karpenter = self.settings.search is Search.KARPENTER
        ordered = interleave(found) if karpenter else found
        best: Command | None = None
        probes = 0
        examined: set[str] = set()
        complete = True
        for candidate in ordered:
            if candidate.name in given.cleared:
                continue  # simulated on this same cluster state by an earlier pass: no command
            blocked = budget.blocked(candidate)  # one command a pass: nothing is spent
            if blocked is not None:
                skipped.append(blocked)
                continue
            if not karpenter and probes >= self.settings.single_probes and best is not None:
                break  # enough compared; with nothing found yet, keep looking
            if probes >= self.settings.single_limit:
                complete = best is not None
                break
            probes += 1
            trial = evaluate([candidate], given.simulate, method=self.name, spot_to_spot=spot)
            if trial.command is None or not balanced(trial.command, found):
                examined.add(candidate.name)
                skipped.append(
                    _skip(
                        candidate,
                        trial.skip_reason or SkipReason.NOT_CHEAPER,
                        trial.message or "consolidation would not save enough",
                    )
                )
                continue
            command = trial.command
            if _preferred(command, best):
                best = command
            if karpenter or not command.replacements:
                break  # nothing found later beats a deletion (nor, for Karpenter's, the first)
        done = frozenset(examined)
        if best is None:
            return Outcome(skipped=tuple(skipped), examined=done, complete=complete)
        return Outcome(commands=(best,), skipped=tuple(skipped), examined=done)


def _worth_it(command: Command, share: float) -> bool:
    """Does a command found past the fixed point save enough to be worth its evictions: at
    least `share` of its candidates' price?"""
    return savings(command) >= share * (candidates_price(command.candidates) or 0.0)


@attrs.frozen
class FixedPointConsolidation:
    """karpy's search, last: when neither multi-node nor single-node consolidation found anything
    this pass, the merges their searches cannot see. Multi-node's bisection stops at a prefix
    that fits but only ties on price, and a prefix is always the first candidates, so two
    half-used nodes apart in disruption-cost order are never asked together. This method
    binary-searches the prefixes again going on past ties (`_prefix_search`), then tries every
    pair of the first `Settings.pairs` candidates (budgets allowing), and keeps the best of what
    consolidates (`better`). Run last, it changes nothing on the way: it only carries on from
    the fixed point the other two stop at."""

    settings: Settings = Settings()
    name: ClassVar[Kind] = Kind.MULTI_NODE_CONSOLIDATION
    reason: ClassVar[Reason] = Reason.UNDERUTILIZED

    def compute(self, given: MethodInput) -> Outcome:
        if self.settings.search is not Search.KARPY:
            return Outcome()
        found, _ = eligible(given)
        spot = self.settings.spot_to_spot
        given = attrs.evolve(given, simulate=given.relaxed or given.simulate)
        ordered, _ = Budget(given.allowances, self.reason).within(found)
        ordered = ordered[:MAX_MULTI_CANDIDATES]
        best, _ = _prefix_search(
            ordered, given.simulate, method=self.name, spot_to_spot=spot, past_ties=True
        )
        if best is not None and not _worth_it(best, self.settings.fixed_point_share):
            best = None
        head = ordered[: self.settings.pairs]
        for i, first in enumerate(head):
            for second in head[i + 1 :]:
                if best is not None and {first.name, second.name} <= set(best.names):
                    continue  # already inside a set that consolidates
                trial = evaluate(
                    [first, second], given.simulate, method=self.name, spot_to_spot=spot
                )
                command = trial.command
                if (
                    command is not None
                    and _worth_it(command, self.settings.fixed_point_share)
                    and better(command, best)
                ):
                    best = command
        if best is None or not balanced(best, found):
            return Outcome()
        return Outcome(commands=(best,))


def validate(
    command: Command,
    given: MethodInput,
    *,
    spot_to_spot: bool,
) -> Command | str:
    """Re-check a consolidation command after the validation delay against a fresh read:
    every candidate is still an eligible candidate, the budgets still allow them all, and the
    simulation still reaches the same decision with as many replacements. Returns the command
    to run (with the fresh candidates and replacement) or why it is dropped."""
    found, _ = eligible(given)
    fresh = {c.name: c for c in found}
    missing = [name for name in command.names if name not in fresh]
    if missing:
        return f"candidate {missing[0]} is no longer a consolidation candidate"
    candidates = [fresh[name] for name in command.names]
    budget = Budget(given.allowances, command.reason)
    for pool in sorted({c.nodepool for c in candidates}):
        ours = [c for c in candidates if c.nodepool == pool]
        if budget.within(ours)[1]:
            return f"budget of nodepool {pool} no longer allows {len(ours)} disruption(s)"
    again = evaluate(candidates, given.simulate, method=command.method, spot_to_spot=spot_to_spot)
    if again.command is None:
        return f"consolidation is no longer possible: {again.message}"
    if again.command.decision is not command.decision or len(again.command.replacements) != len(
        command.replacements
    ):
        return "the simulation's result changed"
    if again.command.decision is Decision.REPLACE and not set(
        again.command.replacements[0].instance_types
    ) & set(command.replacements[0].instance_types):
        return "the replacement's instance types changed"
    return again.command


def looser_if_fewer(strict: Results, loose: Results) -> Results:
    """Consolidation's rule for preferences: the plan solved with preferred terms ignored wins
    when it leaves fewer pods unplaced, then needs fewer new NodeClaims, then costs less — a
    preference never keeps a half-empty node alive (required terms always hold)."""
    if (len(loose.unplaced), len(loose.nodeclaims), loose.price) < (
        len(strict.unplaced),
        len(strict.nodeclaims),
        strict.price,
    ):
        return loose
    return strict


def relaxing_matters(snapshot: ClusterSnapshot, pods: Iterable[Pod]) -> bool:
    """Could `pods` be placed otherwise with preferences ignored? Only when one of them has a
    preference or a NodePool or node carries a PreferNoSchedule taint; otherwise the second
    solve would repeat the first."""
    return snapshot.prefer_no_schedule() or any(has_preferences(p) for p in pods)


def relaxed_solve(
    solved: Callable[[SchedulerOptions], Results],
    snapshot: ClusterSnapshot,
    pods: Iterable[Pod],
    options: SchedulerOptions,
) -> Results:
    """Consolidation's solve, `solved(options)` over `snapshot` placing `pods`: when that needs
    new NodeClaims under the Respect policy, solved again with preferences ignored
    (`looser_if_fewer`) if that could place them otherwise (`relaxing_matters`). The one rule
    the controller's simulation, `karpy simulate --consolidate` and the test fleets apply."""
    results = solved(options)
    if (
        results.nodeclaims
        and options.preference_policy is PreferencePolicy.RESPECT
        and relaxing_matters(snapshot, pods)
    ):
        ignoring = attrs.evolve(options, preference_policy=PreferencePolicy.IGNORE)
        results = looser_if_fewer(results, solved(ignoring))
    return results


def consolidation_solve(
    snapshot: ClusterSnapshot, pods: list[Pod], options: SchedulerOptions
) -> Results:
    """``pods`` over ``snapshot`` as consolidation simulates them (`relaxed_solve`)."""
    return relaxed_solve(lambda given: solve(snapshot, pods, given), snapshot, pods, options)
