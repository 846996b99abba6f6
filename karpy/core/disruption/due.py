"""When a pass over unchanged facts could decide differently: the next time something falls due.

The disruption controller does not run a pass again while cluster state is unchanged since a pass
that found nothing (see karpy.controllers.disruption.rest). Facts alone do not make the answer:
some of it is a matter of the clock. A budget with a schedule opens or closes as minutes pass,
and a pod's `karpenter.sh/do-not-disrupt` duration runs out. This names the earliest such moment
after `now`, so the controller can come back exactly then. Things other controllers turn into
state (a node's `Consolidatable` or `Drifted` condition, expiration deleting a NodeClaim) are not
here: their writes change cluster state, which wakes the pass anyway.

Pure: `now` is UTC epoch seconds, passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.candidates import NodeFacts, PoolDisruption


def budget_turns(budget: BudgetSpec, *, now: float) -> float | None:
    """The next moment after `now` at which a scheduled `budget` may turn active or inactive.

    A budget is active while some whole minute in (now - duration, now] matches its schedule
    (karpy.core.disruption.cron.active), so the answer can change only when a new minute enters
    that window (at the next minute boundary) or the oldest leaves it (`duration` after a
    minute boundary). An unscheduled or invalid budget never turns."""
    if budget.error is not None or budget.schedule is None or budget.duration is None:
        return None
    entering = (math.floor(now / 60) + 1) * 60.0
    leaving = (math.floor((now - budget.duration) / 60) + 1) * 60.0 + budget.duration
    return min(entering, leaving)


def next_due(
    nodes: Iterable[NodeFacts], pools: Mapping[str, PoolDisruption], *, now: float
) -> float | None:
    """The earliest time after `now` at which the same facts may select or budget differently:
    a scheduled budget turning, or a pod's do-not-disrupt duration running out. None when
    nothing in them depends on the clock."""
    times: list[float] = []
    for pool in pools.values():
        for budget in pool.budgets:
            turn = budget_turns(budget, now=now)
            if turn is not None:
                times.append(turn)
    for node in nodes:
        for pod in node.pods:
            until = pod.do_not_disrupt_until
            if until is not None and until > now:
                times.append(until)
    return min(times, default=None)
