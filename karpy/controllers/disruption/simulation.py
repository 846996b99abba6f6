"""Where would a candidate's pods go without it? The scheduling simulation disruption methods ask.

Karpenter answers by scheduling the candidates' reschedulable pods against the cluster as it
would be without the candidates: every other node (existing and in flight) first, then new
NodeClaims from the NodePools. Pods that need a home anyway take part in the same solve, so the
room they will use is not promised twice: unbound pods, and the pods of nodes already being
deleted (a draining node's pods are on their way to somewhere — often to a replacement an
earlier command launched for them). The new NodeClaims the solve plans for the candidates' pods
are the command's replacements; a candidate's pod that fits nowhere blocks the command (other
pods that fit nowhere are the provisioner's business, as they are today). Nodes already tainted
karpenter.sh/disrupted (other commands in flight) take no pods, because the solver honours the
taint. The closure built here is pure (a snapshot and instance types captured once per pass), so
the core's methods can call it as often as they need, off the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from karpy.apis.kube.pod import Pod
from karpy.core.disruption.candidates import Candidate
from karpy.core.disruption.methods import Offer, Simulate, Simulation
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.preferences import PreferencePolicy
from karpy.core.scheduling.results import NodeClaimPlan
from karpy.core.scheduling.scheduler import SchedulerOptions, solve
from karpy.state.pods import is_reschedulable
from karpy.state.snapshot import ClusterObjects, build_snapshot


def _as_pending(pod: Pod) -> Pod:
    """The pod as it will be once evicted and recreated: unbound."""
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, node_name=None))


def offers(
    plan: NodeClaimPlan, instance_types: Mapping[str, Sequence[InstanceType]]
) -> tuple[Offer, ...]:
    """Every available offering of `plan`'s instance types its requirements allow."""
    by_name = {it.name: it for it in instance_types.get(plan.nodepool, ())}
    return tuple(
        Offer(it.name, o.capacity_type, o.zone, o.price)
        for it in (by_name[n] for n in plan.instance_types if n in by_name)
        for o in it.offerings
        if o.available and o.matches(plan.requirements)
    )


def simulator(
    objects: ClusterObjects,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SchedulerOptions,
    *,
    relax: bool = False,
) -> Simulate:
    """A Simulate over `objects` (one consistent read of cluster state).

    With `relax` (consolidation's), a solve that needs new NodeClaims is tried again with
    preferred affinities, spreads and PreferNoSchedule taints ignored, and the relaxed result
    is kept when it places more pods or needs fewer new NodeClaims: a preference never keeps a
    half-empty node alive (the pods' required terms always hold)."""
    ignoring = attrs.evolve(options, preference_policy=PreferencePolicy.IGNORE)

    deleting = {n.metadata.name for n in objects.nodes if n.metadata.deletion_timestamp is not None}
    waiting = [
        p
        for p in objects.pods
        if is_reschedulable(p) and (not p.spec.node_name or p.spec.node_name in deleting)
    ]

    def simulate(candidates: Sequence[Candidate]) -> Simulation:
        nodes = {c.facts.node for c in candidates if c.facts.node}
        claims = {c.name for c in candidates}
        moving = [p for p in objects.pods if p.spec.node_name in nodes and is_reschedulable(p)]
        ours = {p.metadata.uid for p in moving}
        rest = attrs.evolve(
            objects,
            nodes=[n for n in objects.nodes if n.metadata.name not in nodes],
            nodeclaims=[c for c in objects.nodeclaims if c.metadata.name not in claims],
            pods=[p for p in objects.pods if p.spec.node_name not in nodes],
        )
        build = build_snapshot(
            rest,
            pending=[_as_pending(p) for p in (*moving, *waiting)],
            instance_types=instance_types,
        )
        unplaced = [
            f"pod {e.namespace}/{e.name} cannot be placed: {e.message}"
            for e in build.errors
            if e.kind == "Pod" and e.uid in ours
        ]
        results = solve(build.snapshot, list(build.pods), options)
        if relax and options.preference_policy is PreferencePolicy.RESPECT and results.nodeclaims:
            loose = solve(build.snapshot, list(build.pods), ignoring)
            if (len(loose.unplaced), len(loose.nodeclaims), loose.price) < (
                len(results.unplaced),
                len(results.nodeclaims),
                results.price,
            ):
                results = loose
        # The scheduler's own explanation: which pod, and what refused it on every nodepool
        # and existing node (the line `karpy explain` prints first).
        unplaced.extend(e.message for e in results.unplaced if e.uid in ours)
        plans = tuple(p for p in results.nodeclaims if ours.intersection(p.pods))
        return Simulation(
            plans=plans,
            unplaced=tuple(unplaced),
            offers=tuple(offers(p, instance_types) for p in plans),
        )

    return simulate
