"""Translate cluster state into the pure emptiness decision's inputs.

Kept apart from the loop so the translation (which pods count, when a NodeClaim became
Initialized, how NodePool durations become seconds) can be read and tested on its own.

Nomination: Karpenter never disrupts a node its provisioner nominated pods onto. The provisioner
records each node it places pending pods on in cluster state, renewed every pass while they stay
pending and still fit (`ClusterView.nominated`, given here as `nominated(name)`); the node is
asked by its Node's name and by its NodeClaim's (the name it went by before it registered). A
node also counts as nominated while it was Initialized less than the nomination window ago and
no pod event has reached it since: every new node is launched for pods, and kube-scheduler binds
them moments after it becomes schedulable. A NodePool
whose durations do not parse is not skipped silently: the error is carried into the core, which
leaves that pool's nodes alone and reports why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from karpy.apis.duration import parse_duration
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import Budget, NodePool
from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.emptiness import Candidate, PoolDisruption
from karpy.state.pods import do_not_disrupt, is_reschedulable


def initialized_at(claim: NodeClaim) -> float | None:
    """When the NodeClaim's Initialized condition turned True (epoch seconds), else None."""
    for condition in claim.status.conditions:
        if condition.type == ConditionType.INITIALIZED and condition.status is ConditionStatus.TRUE:
            return condition.last_transition_time.timestamp()
    return None


def _nominated(
    names: Iterable[str | None],
    initialized: float | None,
    last: float | None,
    *,
    now: float,
    window: float,
    nominated: Callable[[str], bool],
) -> bool:
    if any(name and nominated(name) for name in names):
        return True
    if initialized is None or now - initialized >= window:
        return False
    return last is None or last < initialized


def _never(_name: str) -> bool:
    return False


def candidates(
    claims: Iterable[NodeClaim],
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    *,
    now: float,
    nomination_window: float,
    nominated: Callable[[str], bool] = _never,
) -> list[Candidate]:
    """One Candidate per NodeClaim, with its Node's reschedulable pod count; `now` is UTC
    epoch seconds; `nominated(name)` says whether the provisioner holds that node (by Node or
    NodeClaim name) for pending pods."""
    by_name = {n.metadata.name or "": n for n in nodes}
    busy: dict[str, int] = {}
    for pod in pods:
        if pod.spec.node_name and is_reschedulable(pod):
            busy[pod.spec.node_name] = busy.get(pod.spec.node_name, 0) + 1
    found: list[Candidate] = []
    for claim in claims:
        node_name = claim.status.node_name
        node = by_name.get(node_name) if node_name else None
        last_time = claim.status.last_pod_event_time
        last = last_time.timestamp() if last_time is not None else None
        initialized = initialized_at(claim)
        found.append(
            Candidate(
                nodeclaim=claim.metadata.name or "",
                node=node.metadata.name if node is not None else None,
                nodepool=claim.metadata.labels.get(wk.LABEL_NODEPOOL),
                initialized_at=initialized,
                last_pod_event_time=last,
                deleting=claim.metadata.deletion_timestamp is not None
                or (node is not None and node.metadata.deletion_timestamp is not None),
                do_not_disrupt=do_not_disrupt(claim) or (node is not None and do_not_disrupt(node)),
                reschedulable_pods=busy.get(node_name or "", 0),
                nominated=_nominated(
                    (node_name, claim.metadata.name),
                    initialized,
                    last,
                    now=now,
                    window=nomination_window,
                    nominated=nominated,
                ),
            )
        )
    return found


def _budget(budget: Budget, index: int) -> BudgetSpec:
    reasons = frozenset(str(r) for r in budget.reasons)
    if budget.duration is None:
        return BudgetSpec(nodes=budget.nodes, schedule=budget.schedule, reasons=reasons)
    field = f"spec.disruption.budgets[{index}].duration"
    try:
        duration = parse_duration(budget.duration, field_name=field)
    except ValueError as error:
        return BudgetSpec(nodes=budget.nodes, error=str(error))
    if duration is None:
        return BudgetSpec(nodes=budget.nodes, error=f"{field}: Never is not a window length")
    return BudgetSpec(
        nodes=budget.nodes,
        schedule=budget.schedule,
        duration=duration.total_seconds(),
        reasons=reasons,
    )


def pool_disruption(pool: NodePool) -> PoolDisruption:
    """The core's view of `pool.spec.disruption`."""
    disruption = pool.spec.disruption
    budgets = tuple(_budget(b, i) for i, b in enumerate(disruption.budgets))
    try:
        after = parse_duration(
            disruption.consolidate_after, field_name="spec.disruption.consolidateAfter"
        )
    except ValueError as error:
        return PoolDisruption(consolidate_after=None, budgets=budgets, error=str(error))
    return PoolDisruption(
        consolidate_after=after.total_seconds() if after is not None else None, budgets=budgets
    )


def pools(nodepools: Sequence[NodePool]) -> dict[str, PoolDisruption]:
    """Live NodePools by name (a deleting NodePool's nodes go with it, not by emptiness)."""
    return {
        p.metadata.name or "": pool_disruption(p)
        for p in nodepools
        if p.metadata.deletion_timestamp is None
    }
