"""Translate cluster state into the pure disruption core's inputs (NodeFacts, PoolDisruption).

Kept apart from the loop so the translation can be read and tested on its own: which pods keep a
node busy, what `karpenter.sh/do-not-disrupt` and PodDisruptionBudgets protect, when a NodeClaim
became Initialized, how NodePool durations become seconds, and which NodeClaims are already in a
disruption command (the annotations of `karpy.controllers.disruption.commands`).

Nomination: Karpenter never disrupts a node its provisioner nominated pods onto. The provisioner
records each node it places pending pods on in cluster state, renewed every pass while they stay
pending and still fit (`ClusterView.nominated`, given here as `nominated(name)`); the node is
asked by its Node's name and by its NodeClaim's (the name it went by before it registered). A
node also counts as nominated while it was Initialized less than the nomination window ago and
no pod event has reached it since (every new node is launched for pods, and kube-scheduler binds
them moments after it becomes schedulable), and while it is the replacement of a disruption
command whose candidates still exist (their pods are on their way to it).

A NodePool whose durations do not parse is not skipped silently: the error is carried into the
core, which leaves that pool's nodes alone and reports why.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from karpy.apis.duration import parse_duration
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import PodDisruptionBudget
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.controllers.disruption import commands
from karpy.core.disruption.candidates import NodeFacts, PodFacts, Policy, PoolDisruption
from karpy.core.disruption.consolidation import parse_min_improvement
from karpy.state.conditions import claim_is_true, get_condition
from karpy.state.nodepools import pool_budgets
from karpy.state.pods import do_not_disrupt, is_reschedulable
from karpy.state.protection import Budgets, do_not_disrupt_until

ANNOTATION_POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
NODE_READY = "Ready"


def initialized_at(claim: NodeClaim) -> float | None:
    """When the NodeClaim's Initialized condition turned True (epoch seconds), else None."""
    condition = get_condition(claim, ConditionType.INITIALIZED)
    if condition is None or condition.status is not ConditionStatus.TRUE:
        return None
    return condition.last_transition_time.timestamp()


def drifted(claim: NodeClaim) -> str | None:
    """The reason of a True `Drifted` condition, else None."""
    condition = get_condition(claim, ConditionType.DRIFTED)
    if condition is None or condition.status is not ConditionStatus.TRUE:
        return None
    return condition.reason or "Drifted"


def _seconds(text: str | None, *, field_name: str) -> float | None:
    """A duration field in seconds; None for unset, Never or a value that does not parse (the
    apiserver's pattern refuses those, so only a hand-edited object can have one)."""
    if text is None:
        return None
    try:
        parsed = parse_duration(text, field_name=field_name)
    except ValueError:
        return None
    return parsed.total_seconds() if parsed is not None else None


def _deletion_cost(pod: Pod) -> float:
    try:
        return float(pod.metadata.annotations.get(ANNOTATION_POD_DELETION_COST, "0"))
    except ValueError:
        return 0.0


def pod_facts(pod: Pod, budgets: Budgets) -> PodFacts:
    return PodFacts(
        name=f"{pod.metadata.namespace}/{pod.metadata.name}",
        uid=pod.metadata.uid or "",
        deletion_cost=_deletion_cost(pod),
        priority=pod.spec.priority or 0,
        do_not_disrupt_until=do_not_disrupt_until(pod),
        blocking_pdb=budgets.blocking(pod.metadata.namespace or "", pod.metadata.labels),
    )


def _node_ready(node: Node | None) -> bool:
    if node is None:
        return False
    return any(
        c.type == NODE_READY and c.status is ConditionStatus.TRUE for c in node.status.conditions
    )


def _nominated(initialized: float | None, last: float | None, *, now: float, window: float) -> bool:
    if initialized is None or now - initialized >= window:
        return False
    return last is None or last < initialized


def _never(_name: str) -> bool:
    return False


def node_facts(
    claims: Sequence[NodeClaim],
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    pdbs: Iterable[PodDisruptionBudget] = (),
    *,
    now: float,
    nomination_window: float,
    busy: Collection[str] = (),
    nominated: Callable[[str], bool] = _never,
) -> list[NodeFacts]:
    """One NodeFacts per NodeClaim; `now` is UTC epoch seconds. `busy` names NodeClaims the
    orchestration queue is starting a command for (their annotations may not show yet)."""
    by_name = {n.metadata.name or "": n for n in nodes}
    budgets = Budgets(pdbs)
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.spec.node_name and is_reschedulable(pod):
            on_node.setdefault(pod.spec.node_name, []).append(pod)
    # A command is live while any of its candidates exists, draining ones included: their pods
    # are on their way to its replacements.
    live_commands = {commands.command_of(c) for c in claims} - {None}
    found: list[NodeFacts] = []
    for claim in claims:
        node_name = claim.status.node_name
        node = by_name.get(node_name) if node_name else None
        last_time = claim.status.last_pod_event_time
        last = last_time.timestamp() if last_time is not None else None
        initialized = initialized_at(claim)
        labels = claim.metadata.labels
        created = claim.metadata.creation_timestamp
        protecting = commands.replacement_for(claim)
        found.append(
            NodeFacts(
                nodeclaim=claim.metadata.name or "",
                node=node.metadata.name if node is not None else None,
                nodepool=labels.get(wk.LABEL_NODEPOOL),
                created_at=created.timestamp() if created is not None else now,
                initialized_at=initialized,
                last_pod_event_time=last,
                expire_after=_seconds(claim.spec.expire_after, field_name="spec.expireAfter"),
                instance_type=labels.get(wk.LABEL_INSTANCE_TYPE),
                capacity_type=labels.get(wk.LABEL_CAPACITY_TYPE),
                zone=labels.get(wk.LABEL_TOPOLOGY_ZONE),
                ready=_node_ready(node),
                deleting=claim.metadata.deletion_timestamp is not None
                or (node is not None and node.metadata.deletion_timestamp is not None),
                disrupting=commands.command_of(claim) is not None
                or (claim.metadata.name or "") in busy,
                do_not_disrupt=do_not_disrupt(claim) or (node is not None and do_not_disrupt(node)),
                nominated=any(n and nominated(n) for n in (node_name, claim.metadata.name))
                or _nominated(initialized, last, now=now, window=nomination_window)
                or (protecting is not None and protecting in live_commands),
                drifted=drifted(claim),
                consolidatable=claim_is_true(claim, ConditionType.CONSOLIDATABLE),
                pods=tuple(pod_facts(p, budgets) for p in on_node.get(node_name or "", ())),
            )
        )
    return found


ANNOTATION_MIN_IMPROVEMENT = "karpy.sh/consolidation-min-improvement"
"""NodePool annotation: the least a consolidation replacement must save, as a percentage of
the price of the nodes it replaces (e.g. "10%"); overrides the global option."""


def pool_disruption(pool: NodePool, *, min_improvement: float = 0.0) -> PoolDisruption:
    """The core's view of `pool.spec.disruption`; `min_improvement` is the global minimum
    price improvement, which the NodePool's annotation overrides."""
    disruption = pool.spec.disruption
    budgets = pool_budgets(pool)
    policy = Policy(str(disruption.consolidation_policy))
    static = pool.spec.replicas is not None
    annotated = pool.metadata.annotations.get(ANNOTATION_MIN_IMPROVEMENT)
    if annotated is not None:
        try:
            min_improvement = parse_min_improvement(
                annotated,
                source=f"NodePool {pool.metadata.name} annotation {ANNOTATION_MIN_IMPROVEMENT}",
            )
        except ValueError as error:
            return PoolDisruption(
                consolidate_after=None,
                budgets=budgets,
                policy=policy,
                static=static,
                error=str(error),
            )
    try:
        after = parse_duration(
            disruption.consolidate_after, field_name="spec.disruption.consolidateAfter"
        )
    except ValueError as error:
        return PoolDisruption(
            consolidate_after=None, budgets=budgets, policy=policy, static=static, error=str(error)
        )
    return PoolDisruption(
        consolidate_after=after.total_seconds() if after is not None else None,
        budgets=budgets,
        policy=policy,
        static=static,
        min_improvement=min_improvement,
    )


def pools(
    nodepools: Sequence[NodePool], *, min_improvement: float = 0.0
) -> dict[str, PoolDisruption]:
    """Live NodePools by name (a deleting NodePool's nodes go with it, not by disruption)."""
    return {
        p.metadata.name or "": pool_disruption(p, min_improvement=min_improvement)
        for p in nodepools
        if p.metadata.deletion_timestamp is None
    }
