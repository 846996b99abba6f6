"""Where a candidate's pods would go without it: onto other nodes' room first, then onto new
NodeClaims (its replacements); pods that need a home anyway (unbound, on a node leaving in a
command or being deleted, or evicted and not yet recreated) take their room first, so two
commands never promise the same room twice."""

from __future__ import annotations

from datetime import timedelta

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference
from karpy.apis.v1.taints import DISRUPTED_TAINT
from karpy.controllers.disruption import commands
from karpy.controllers.disruption.simulation import simulator
from karpy.core.disruption.candidates import Candidate, NodeFacts, PoolDisruption
from karpy.core.scheduling.scheduler import SchedulerOptions
from karpy.state.snapshot import ClusterObjects
from karpy.testing.instancetypes import make_instance_types
from tests.unit.state.support import T0, apps_nodepool, inflate, node

TYPES = {"apps": make_instance_types(8)}
APPS = {"intent": "apps", "karpenter.sh/nodepool": "apps", "karpenter.sh/initialized": "true"}


def _bound(pod: Pod, node_name: str) -> Pod:
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, node_name=node_name))


def _candidate(name: str) -> Candidate:
    facts = NodeFacts(nodeclaim=name, node=name, nodepool="apps", created_at=0)
    return Candidate(facts=facts, pool=PoolDisruption(consolidate_after=None), cost=1.0)


def _deleting(n: Node) -> Node:
    return attrs.evolve(n, metadata=attrs.evolve(n.metadata, deletion_timestamp=T0))


def test_a_candidates_pods_go_to_other_nodes_before_new_capacity() -> None:
    a, b = inflate(2)
    objects = ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[node("old", labels=APPS), node("roomy", labels=APPS)],
        pods=[_bound(a, "old"), _bound(b, "roomy")],
    )
    simulate = simulator(objects, TYPES, SchedulerOptions())
    result = simulate([_candidate("old")])
    assert result.unplaced == ()
    assert result.plans == ()  # "roomy" (4 CPU) takes the 1-CPU pod: delete, no replacement


def test_a_draining_nodes_pods_take_part_and_the_room_is_not_promised_twice() -> None:
    small = {"allocatable": {"cpu": "1500m", "memory": "4Gi", "pods": "110"}}
    a, b = inflate(2)
    base = ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[node("old", labels=APPS, **small), node("spare", labels=APPS, **small)],
        pods=[_bound(a, "old")],
    )
    alone = simulator(base, TYPES, SchedulerOptions())([_candidate("old")])
    assert alone.plans == ()  # "spare" has room for the candidate's one pod
    draining = attrs.evolve(
        base,
        nodes=[*base.nodes, _deleting(node("draining", labels=APPS, **small))],
        pods=[*base.pods, _bound(b, "draining")],
    )
    shared = simulator(draining, TYPES, SchedulerOptions())([_candidate("old")])
    assert shared.unplaced == ()
    # "spare" fits one of the two pods that need a home: whichever does not get it needs new
    # capacity, and if that is the candidate's pod, the command replaces it.
    plans = [set(p.pods) for p in shared.plans]
    assert all(a.metadata.uid in p for p in plans)
    assert len(plans) <= 1


def test_only_the_candidates_pods_can_block_it() -> None:
    (a,) = inflate(1)
    huge = attrs.evolve(
        inflate(1)[0],
        metadata=attrs.evolve(a.metadata, name="huge", uid="uid-huge"),
        spec=attrs.evolve(a.spec, node_selector={"intent": "nowhere"}),
    )
    objects = ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[node("old", labels=APPS)],
        pods=[_bound(a, "old"), huge],
    )
    result = simulator(objects, TYPES, SchedulerOptions())([_candidate("old")])
    assert result.unplaced == ()
    assert [list(p.pods) for p in result.plans] == [[a.metadata.uid]]


def test_consolidation_relaxes_a_preferred_anti_affinity_that_would_need_a_new_node() -> None:
    from karpy.apis.kube.common import LabelSelector
    from karpy.apis.kube.pod import Affinity, PodAffinity, PodAffinityTerm, WeightedPodAffinityTerm

    term = PodAffinityTerm(
        topology_key="kubernetes.io/hostname",
        label_selector=LabelSelector(match_labels={"app": "inflate"}),
    )
    apart = Affinity(
        pod_anti_affinity=PodAffinity(
            preferred_during_scheduling_ignored_during_execution=(
                WeightedPodAffinityTerm(weight=100, pod_affinity_term=term),
            )
        )
    )
    a, b = (
        attrs.evolve(
            p,
            metadata=attrs.evolve(p.metadata, labels={"app": "inflate"}),
            spec=attrs.evolve(p.spec, affinity=apart),
        )
        for p in inflate(2)
    )
    objects = ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[node("old", labels=APPS), node("roomy", labels=APPS)],
        pods=[_bound(a, "old"), _bound(b, "roomy")],
    )
    strict = simulator(objects, TYPES, SchedulerOptions())([_candidate("old")])
    assert len(strict.plans) == 1  # the preference asks for a node of its own
    relaxed = simulator(objects, TYPES, SchedulerOptions(), relax=True)([_candidate("old")])
    assert relaxed.unplaced == ()
    assert relaxed.plans == ()  # relaxed, the pod joins "roomy": a delete


# The drift race: three pods that must run one per node, on three drifted nodes. A command for
# "old1" is in flight (its replacement "r1" is up and still empty); the next pass simulates
# "old2". Room on "r1" is old1's pod's, until that pod runs again: old2's pod needs a
# replacement of its own, or old2 would be deleted with nothing launched for it.

SMALL = {"allocatable": {"cpu": "1500m", "memory": "4Gi", "pods": "110"}}


def _one_per_node(pods: list[Pod]) -> list[Pod]:
    from karpy.apis.kube.common import LabelSelector
    from karpy.apis.kube.pod import Affinity, PodAffinity, PodAffinityTerm

    term = PodAffinityTerm(
        topology_key="kubernetes.io/hostname",
        label_selector=LabelSelector(match_labels={"app": "inflate"}),
    )
    apart = Affinity(
        pod_anti_affinity=PodAffinity(required_during_scheduling_ignored_during_execution=(term,))
    )
    return [attrs.evolve(p, spec=attrs.evolve(p.spec, affinity=apart)) for p in pods]


def _claim(name: str, *, command: str | None = None) -> NodeClaim:
    annotations = (
        commands.record(command, replacements=1, started=T0) if command is not None else {}
    )
    return NodeClaim(
        metadata=ObjectMeta(name=name, annotations=annotations),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
        status=NodeClaimStatus(node_name=name),
    )


def _tainted(n: Node) -> Node:
    from karpy.apis.kube.node import NodeSpec

    return attrs.evolve(n, spec=NodeSpec(taints=(DISRUPTED_TAINT,)))


def _evicted(p: Pod) -> Pod:
    """`p` as the Eviction API leaves it: terminating, asked 30 s before its deletionTimestamp."""
    meta = attrs.evolve(
        p.metadata,
        deletion_timestamp=T0 + timedelta(minutes=1, seconds=30),
        deletion_grace_period_seconds=30,
    )
    return attrs.evolve(p, metadata=meta)


def _recreated(p: Pod, name: str) -> Pod:
    """The ReplicaSet's replacement for `p`, created after the eviction, not bound yet."""
    meta = attrs.evolve(
        p.metadata, name=name, uid=f"uid-{name}", creation_timestamp=T0 + timedelta(minutes=1)
    )
    return attrs.evolve(p, metadata=meta, spec=attrs.evolve(p.spec, node_name=None))


def _race(old1: Node, first: Pod, *, claim: NodeClaim | None = None) -> ClusterObjects:
    _, b, c = _one_per_node(inflate(3))
    return ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[
            old1,
            node("old2", labels=APPS, **SMALL),
            node("old3", labels=APPS, **SMALL),
            node("r1", labels=APPS, **SMALL),
        ],
        nodeclaims=[claim or _claim("old1"), _claim("old2"), _claim("old3"), _claim("r1")],
        pods=[first, _bound(b, "old2"), _bound(c, "old3")],
    )


def _b_is_replaced(objects: ClusterObjects) -> bool:
    result = simulator(objects, TYPES, SchedulerOptions())([_candidate("old2")])
    assert result.unplaced == ()
    b_uid = inflate(3)[1].metadata.uid
    return [list(p.pods) for p in result.plans] == [[b_uid]]


def test_a_pod_of_a_command_in_flight_keeps_the_room_of_its_replacement() -> None:
    a = _one_per_node(inflate(3))[0]
    old1 = node("old1", labels=APPS, **SMALL)
    # Nothing is leaving old1: r1 is free room, and old2's pod may take it.
    idle = _race(old1, _bound(a, "old1"))
    assert not _b_is_replaced(idle)
    # old1 is a candidate of a command in flight (recorded on its NodeClaim, or shown by the
    # taint, or being deleted): its pod is on its way to r1.
    assert _b_is_replaced(_race(old1, _bound(a, "old1"), claim=_claim("old1", command="c1")))
    assert _b_is_replaced(_race(_tainted(old1), _bound(a, "old1")))
    assert _b_is_replaced(_race(_deleting(old1), _bound(a, "old1")))


def test_an_evicted_pod_keeps_its_room_until_its_controller_recreates_it() -> None:
    a = _one_per_node(inflate(3))[0]
    old1 = _deleting(node("old1", labels=APPS, **SMALL))
    # Evicted, not yet recreated: the pod is terminating and its ReplicaSet has no new pod.
    evicted = _race(old1, _bound(_evicted(a), "old1"))
    assert _b_is_replaced(evicted)
    # Recreated and pending: the new pod is the one that needs the room now.
    again = _recreated(a, "inflate-5d8c-new")
    pending = attrs.evolve(evicted, pods=[*evicted.pods, again])
    assert _b_is_replaced(pending)
    # Recreated and running on r1: the room is taken, and the terminating pod is not counted
    # twice (with r1 taken, old3's neighbour "spare" is where old2's pod goes: a delete).
    landed = attrs.evolve(
        evicted,
        nodes=[*evicted.nodes, node("spare", labels=APPS, **SMALL)],
        nodeclaims=[*evicted.nodeclaims, _claim("spare")],
        pods=[*evicted.pods, _bound(again, "r1")],
    )
    assert not _b_is_replaced(landed)
    # A bare pod being deleted is not coming back: it keeps no room.
    bare = attrs.evolve(
        _evicted(a), metadata=attrs.evolve(_evicted(a).metadata, owner_references=())
    )
    assert not _b_is_replaced(_race(old1, _bound(bare, "old1")))
