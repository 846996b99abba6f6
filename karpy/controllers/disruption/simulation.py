"""Where would a candidate's pods go without it? The scheduling simulation disruption methods ask.

Karpenter answers by scheduling the candidates' reschedulable pods against the cluster as it
would be without the candidates: every other node (existing and in flight) first, then new
NodeClaims from the NodePools. The new NodeClaims the solve plans for the candidates' pods are the
command's replacements; a candidate's pod that fits nowhere blocks the command (other pods that
fit nowhere are the provisioner's business, as they are today). Nodes already tainted
karpenter.sh/disrupted (other commands in flight) take no pods, because the solver honours the
taint.

Pods already on their way somewhere are *waiting*, and they are placed before the candidates'
pods, so that room they will take is never promised to a candidate (replace before remove holds
for every command, not only the first): unbound pods, and the pods of nodes that are leaving — a
Node or NodeClaim being deleted, a NodeClaim recorded as a candidate of a command in flight, a
Node tainted karpenter.sh/disrupted. An earlier command launched replacements for those pods; from
the moment it starts until its pods are recreated, they still need that room. So a leaving node's
pod counts while it runs, while it is being evicted (terminating, when a controller will recreate
it), and its recreated copy counts as an unbound pod until it binds; a terminating pod stops
counting once its controller has a pod created after the eviction (its replacement). Waiting
pods are solved first; the room they take on existing and in-flight nodes is then reserved, and
the candidates' pods are solved with the waiting pods that still need new NodeClaims (so those
NodeClaims may be shared, and are not promised twice either).

The closure built here is pure (one read of the cluster and the instance types captured once per
pass), so the core's methods can call it as often as they need, off the event loop. A pass
simulates dozens of candidate sets against the same read, so the read is translated for the
core once, on the first call (`karpy.state.snapshot.TranslatedCluster`), and each simulation
builds its snapshot from that translation without the candidates' Nodes, pods and NodeClaims;
only the pods to place are translated per call. The answer is the one a snapshot built afresh
from the read less the candidates would give.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.controllers.disruption import commands
from karpy.core.disruption.candidates import Candidate
from karpy.core.disruption.consolidation import relaxed_solve
from karpy.core.disruption.methods import Simulate, Simulation, offers
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod as CorePod
from karpy.core.scheduling.options import SchedulerOptions
from karpy.core.scheduling.results import Results
from karpy.core.scheduling.scheduler import reserve_nominated, solve
from karpy.core.snapshot import ClusterSnapshot
from karpy.state.pods import is_daemon_owned, is_reschedulable, is_static, is_terminal
from karpy.state.snapshot import (
    ClusterObjects,
    SnapshotBuild,
    TranslatedCluster,
    translate_cluster,
)


def _as_pending(pod: Pod) -> Pod:
    """The pod as it will be once evicted and recreated: unbound."""
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, node_name=None))


def leaving_nodes(nodes: Iterable[Node], claims: Iterable[NodeClaim]) -> set[str]:
    """Names of the Nodes whose pods are on their way elsewhere: being deleted, tainted
    karpenter.sh/disrupted, or the Node of a NodeClaim being deleted or recorded as a candidate
    of a disruption command."""
    leaving = {
        n.metadata.name or ""
        for n in nodes
        if n.metadata.deletion_timestamp is not None or commands.tainted(n)
    }
    for claim in claims:
        node_name = claim.status.node_name
        if node_name and (
            claim.metadata.deletion_timestamp is not None or commands.command_of(claim) is not None
        ):
            leaving.add(node_name)
    return leaving


def _controller(pod: Pod) -> str | None:
    """The uid of the controller that recreates `pod` if it goes away (None for a bare pod,
    a DaemonSet's or a static pod)."""
    if is_daemon_owned(pod) or is_static(pod):
        return None
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return ref.uid
    return None


def _requested(pod: Pod) -> datetime.datetime:
    """When `pod`'s deletion was asked for (its deletionTimestamp less the grace period)."""
    deleted = pod.metadata.deletion_timestamp
    if deleted is None:
        return datetime.datetime.max.replace(tzinfo=datetime.UTC)
    return deleted - datetime.timedelta(seconds=pod.metadata.deletion_grace_period_seconds or 0)


def waiting_pods(objects: ClusterObjects, leaving: Collection[str]) -> list[Pod]:
    """The pods that need room whatever the candidates are: unbound reschedulable pods, the
    reschedulable pods of the `leaving` nodes, and the pods being evicted from them whose
    controller has not yet created their replacement (a pod of the same controller created
    after the eviction)."""
    waiting: list[Pod] = []
    evicted: dict[str, list[Pod]] = {}
    for pod in objects.pods:
        if is_reschedulable(pod):
            if not pod.spec.node_name or pod.spec.node_name in leaving:
                waiting.append(pod)
        elif (
            pod.spec.node_name in leaving
            and pod.metadata.deletion_timestamp is not None
            and not is_terminal(pod)
            and (owner := _controller(pod)) is not None
        ):
            evicted.setdefault(owner, []).append(pod)
    for owner, gone in evicted.items():
        newer = sorted(
            p.metadata.creation_timestamp
            for p in objects.pods
            if p.metadata.deletion_timestamp is None
            and p.metadata.creation_timestamp is not None
            and _controller(p) == owner
        )
        for pod in sorted(gone, key=_requested):
            asked = _requested(pod)
            replaced = next((i for i, t in enumerate(newer) if t >= asked), None)
            if replaced is None:
                waiting.append(pod)
            else:
                del newer[replaced]
    return waiting


def _solve(
    snapshot: ClusterSnapshot,
    waiting: Sequence[CorePod],
    moving: Sequence[CorePod],
    options: SchedulerOptions,
) -> Results:
    """The waiting pods first, onto existing and in-flight nodes; then the candidates' pods
    with the waiting pods that still need new NodeClaims."""
    if not waiting:
        return solve(snapshot, list(moving), options)
    first = solve(snapshot, list(waiting), options)
    placed = {n.pod for n in first.nominations}
    reserved = reserve_nominated(snapshot, first, waiting)
    return solve(reserved, [*moving, *(p for p in waiting if p.uid not in placed)], options)


def _reschedulable_by_node(pods: Sequence[Pod]) -> dict[str, list[tuple[int, Pod]]]:
    """Every node's reschedulable pods, each with its place in `pods` (the order a candidate's
    pods are moved in)."""
    by_node: dict[str, list[tuple[int, Pod]]] = {}
    for i, pod in enumerate(pods):
        if pod.spec.node_name and is_reschedulable(pod):
            by_node.setdefault(pod.spec.node_name, []).append((i, pod))
    return by_node


@attrs.frozen
class _Read:
    """What every simulation of one read shares: the waiting pods, and the read translated for
    the core and each node's reschedulable pods, both made on first use."""

    waiting: list[Pod]
    translated: Callable[[], TranslatedCluster]
    by_node: Callable[[], dict[str, list[tuple[int, Pod]]]]


def _prepare(
    objects: ClusterObjects, instance_types: Mapping[str, Sequence[InstanceType]]
) -> _Read:
    leaving = leaving_nodes(objects.nodes, objects.nodeclaims)
    # Leaving nodes take no part but through their pods (Karpenter's: nodes marked for deletion
    # are not scheduling targets, their pods are pending).
    staying = attrs.evolve(
        objects,
        nodes=[n for n in objects.nodes if n.metadata.name not in leaving],
        nodeclaims=[c for c in objects.nodeclaims if c.status.node_name not in leaving],
        pods=[p for p in objects.pods if p.spec.node_name not in leaving],
    )
    # Translated on the first call, then shared by every call: each simulation is the same
    # read without its candidates (TranslatedCluster.build leaves their Nodes, their pods and
    # their NodeClaims out), so only the pods to place are translated per call.
    return _Read(
        waiting=waiting_pods(objects, leaving),
        translated=functools.cache(lambda: translate_cluster(staying, instance_types)),
        by_node=functools.cache(lambda: _reschedulable_by_node(objects.pods)),
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
    return _simulator(_prepare(objects, instance_types), instance_types, options, relax=relax)


def simulators(
    objects: ClusterObjects,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SchedulerOptions,
) -> tuple[Simulate, Simulate]:
    """`simulator` without and with `relax` over the same read, translated once for both."""
    read = _prepare(objects, instance_types)
    return (
        _simulator(read, instance_types, options, relax=False),
        _simulator(read, instance_types, options, relax=True),
    )


def _simulator(
    read: _Read,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SchedulerOptions,
    *,
    relax: bool,
) -> Simulate:
    waiting, translated, by_node = read.waiting, read.translated, read.by_node

    def simulate(candidates: Sequence[Candidate]) -> Simulation:
        nodes = {c.facts.node for c in candidates if c.facts.node}
        claims = {c.name for c in candidates}
        # The candidates' own pods, read from every pod: a candidate is never left without them.
        mine_in_order = sorted((x for n in nodes for x in by_node().get(n, ())), key=lambda x: x[0])
        moving = [p for _, p in mine_in_order]
        ours = {p.metadata.uid for p in moving}
        others = [p for p in waiting if p.metadata.uid not in ours]
        build = translated().build(
            [_as_pending(p) for p in (*moving, *others)],
            without_nodes=nodes,
            without_claims=claims,
        )
        return answer(build, ours, options, relax=relax, instance_types=instance_types)

    return simulate


def answer(
    build: SnapshotBuild,
    ours: AbstractSet[str | None],
    options: SchedulerOptions,
    *,
    relax: bool,
    instance_types: Mapping[str, Sequence[InstanceType]],
) -> Simulation:
    """The simulation from one snapshot `build` whose pending pods are the candidates' (uids
    `ours`) and the waiting ones: the waiting pods first, then the candidates' (`_solve`);
    with `relax`, again with preferences ignored when that could place them otherwise."""
    unplaced = [
        f"pod {e.namespace}/{e.name} cannot be placed: {e.message}"
        for e in build.errors
        if e.kind == "Pod" and e.uid in ours
    ]
    mine = [p for p in build.pods if p.uid in ours]
    theirs = [p for p in build.pods if p.uid not in ours]

    def solved(given: SchedulerOptions) -> Results:
        return _solve(build.snapshot, theirs, mine, given)

    results = (
        relaxed_solve(solved, build.snapshot, build.pods, options) if relax else solved(options)
    )
    # The scheduler's own explanation: which pod, and what refused it on every nodepool
    # and existing node (the line `karpy explain` prints first).
    unplaced.extend(e.message for e in results.unplaced if e.uid in ours)
    plans = tuple(p for p in results.nodeclaims if not ours.isdisjoint(p.pods))
    return Simulation(
        plans=plans,
        unplaced=tuple(unplaced),
        offers=tuple(offers(p, instance_types) for p in plans),
    )
