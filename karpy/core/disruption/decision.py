"""One disruption pass, end to end and pure: facts in, commands out.

`disrupt` is what the disruption controller runs off the event loop each pass: select the
candidates, count each NodePool's NodeClaims the way budgets count them, compute the allowance
per NodePool and reason, and ask the methods in order. Tests and properties drive the same
function, so what they check is what runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from karpy.core.disruption.budgets import Allowance, PoolCount, allowances
from karpy.core.disruption.candidates import NodeFacts, PoolDisruption, Selection, select
from karpy.core.disruption.consolidation import (
    MultiNodeConsolidation,
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
    decide,
)

DEFAULT_METHODS: tuple[Method, ...] = (
    Emptiness(),
    StaticDrift(),
    Drift(),
    MultiNodeConsolidation(),
    SingleNodeConsolidation(),
)
"""Karpenter's order; the first method that yields commands wins a pass."""


@attrs.frozen(kw_only=True)
class Decision:
    """A pass: the candidates and who was left out, the allowances it decided within, and the
    method's commands."""

    selection: Selection
    allowances: Mapping[Reason, Mapping[str, Allowance]]
    outcome: Pass


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


def disrupt(
    nodes: Sequence[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    *,
    now: float,
    simulate: Simulate,
    methods: Sequence[Method] = DEFAULT_METHODS,
    relaxed: Simulate | None = None,
) -> Decision:
    """One pass over `nodes` (every NodeClaim in the cluster) and the live `pools`."""
    selection = select(nodes, pools, now=now)
    counts = pool_counts(nodes)
    budgets = {name: pool.budgets for name, pool in pools.items()}
    by_reason = {
        reason: allowances(budgets, counts, reason=reason.value, now=now) for reason in Reason
    }
    outcome = decide(
        methods,
        selection.candidates,
        by_reason.__getitem__,
        now=now,
        simulate=simulate,
        relaxed=relaxed,
    )
    return Decision(selection=selection, allowances=by_reason, outcome=outcome)


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
    budgets = {name: pool.budgets for name, pool in pools.items()}
    grants = allowances(budgets, pool_counts(nodes), reason=command.reason.value, now=now)
    given = MethodInput(
        candidates=selection.candidates, allowances=grants, now=now, simulate=simulate
    )
    return validate(command, given, spot_to_spot=spot_to_spot)
