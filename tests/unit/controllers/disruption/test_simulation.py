"""Where a candidate's pods would go without it: onto other nodes' room first, then onto new
NodeClaims (its replacements); pods that need a home anyway (unbound, on a node leaving in a
command or being deleted, or evicted and not yet recreated) take their room first, so two
commands never promise the same room twice."""

from __future__ import annotations

from datetime import timedelta

import attrs

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference
from karpy.apis.v1.taints import DISRUPTED_TAINT
from karpy.controllers.disruption import commands
from karpy.controllers.disruption.simulation import (
    _as_pending,
    answer,
    leaving_nodes,
    simulator,
    simulators,
    waiting_pods,
)
from karpy.core.disruption.candidates import Candidate, NodeFacts, PoolDisruption
from karpy.core.disruption.methods import Simulation
from karpy.core.scheduling.options import SchedulerOptions
from karpy.state.pods import is_reschedulable
from karpy.state.snapshot import ClusterObjects, build_snapshot
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


# One simulator answers every candidate set of a pass from one translation of the read; it must
# answer as a snapshot built afresh for each call from the read less the candidates does.


def _fresh(
    objects: ClusterObjects, candidates: list[Candidate], *, relax: bool = False
) -> Simulation:
    """The simulation with a snapshot built for this call alone: every object of the read but
    the leaving nodes' and the candidates' translated again."""
    options = SchedulerOptions()
    leaving = leaving_nodes(objects.nodes, objects.nodeclaims)
    waiting = waiting_pods(objects, leaving)
    nodes = {c.facts.node for c in candidates if c.facts.node}
    claims = {c.name for c in candidates}
    moving = [p for p in objects.pods if p.spec.node_name in nodes and is_reschedulable(p)]
    ours = {p.metadata.uid for p in moving}
    rest = attrs.evolve(
        objects,
        nodes=[n for n in objects.nodes if n.metadata.name not in leaving | nodes],
        nodeclaims=[
            c
            for c in objects.nodeclaims
            if c.status.node_name not in leaving and c.metadata.name not in claims
        ],
        pods=[p for p in objects.pods if p.spec.node_name not in leaving | nodes],
    )
    pending = [
        _as_pending(p) for p in (*moving, *(p for p in waiting if p.metadata.uid not in ours))
    ]
    build = build_snapshot(rest, pending=pending, instance_types=TYPES)
    return answer(build, ours, options, relax=relax, instance_types=TYPES)


def _launched(claim: NodeClaim) -> NodeClaim:
    """`claim` launched (its allocatable known), of the apps NodePool."""
    room = {"cpu": Quantity("2"), "memory": Quantity("4Gi"), "pods": Quantity("10")}
    return attrs.evolve(
        claim,
        metadata=attrs.evolve(claim.metadata, labels=APPS),
        status=attrs.evolve(claim.status, allocatable=room),
    )


def _busy_cluster() -> ClusterObjects:
    """Nodes with room and without, a node leaving in a command (its pods waiting), an unbound
    pod, a launched NodeClaim without a Node (in flight), a pod that cannot be translated and a
    DaemonSet pod on candidates, pods in two namespaces with a required spread."""
    from karpy.apis.kube.common import LabelSelector
    from karpy.apis.kube.pod import TopologySpreadConstraint

    spread = TopologySpreadConstraint(
        max_skew=1,
        topology_key="kubernetes.io/hostname",
        when_unsatisfiable="DoNotSchedule",
        label_selector=LabelSelector(match_labels={"app": "inflate"}),
    )
    pods = inflate(9)
    pods[4] = attrs.evolve(pods[4], metadata=attrs.evolve(pods[4].metadata, namespace="data"))
    pods[5] = attrs.evolve(
        pods[5], spec=attrs.evolve(pods[5].spec, topology_spread_constraints=(spread,))
    )
    broken = attrs.evolve(
        pods[6],
        spec=attrs.evolve(
            pods[6].spec,
            containers=(
                attrs.evolve(
                    pods[6].spec.containers[0],
                    resources=attrs.evolve(
                        pods[6].spec.containers[0].resources,
                        requests={"cpu": Quantity("lots")},
                    ),
                ),
            ),
        ),
    )
    daemon = from_dict(
        Pod,
        {
            "metadata": {
                "name": "logs-1",
                "namespace": "kube-system",
                "uid": "uid-logs-1",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "logs", "uid": "ds"}
                ],
            },
            "spec": {"nodeName": "n3", "containers": []},
        },
    )
    return ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[
            node("n1", labels=APPS, **SMALL),
            node("n2", labels=APPS),
            node("n3", labels=APPS, **SMALL),
            node("n4", labels=APPS),
            node("old", labels=APPS, **SMALL),
        ],
        nodeclaims=[
            _launched(_claim("n1")),
            _launched(_claim("n2")),
            _launched(_claim("n3")),
            _launched(_claim("n4")),
            _launched(_claim("old", command="c1")),
            _launched(_claim("flying")),  # no Node registered yet
        ],
        pods=[
            _bound(pods[0], "n1"),
            _bound(pods[1], "n2"),
            _bound(pods[2], "n2"),
            _bound(pods[3], "n3"),
            _bound(pods[4], "n3"),
            _bound(pods[5], "n4"),
            _bound(broken, "n4"),
            _bound(pods[7], "old"),
            pods[8],  # unbound
            daemon,
        ],
    )


def test_one_simulator_answers_every_candidate_set_as_a_fresh_snapshot_would() -> None:
    objects = _busy_cluster()
    sets = [
        ["n1"],
        ["n2"],
        ["n3"],
        ["n4"],
        ["n1", "n3"],
        ["n2", "n4"],
        ["n1", "n2", "n3", "n4"],
        ["n3"],
    ]
    for relax in (False, True):
        simulate = simulator(objects, TYPES, SchedulerOptions(), relax=relax)
        answers = []
        for names in sets:
            candidates = [_candidate(n) for n in names]
            got = simulate(candidates)
            assert got == _fresh(objects, candidates, relax=relax), (names, relax)
            answers.append(got)
        # Not only empty answers: replacements, and the untranslatable pod blocking its node.
        assert any(a.plans for a in answers)
        assert any("lots" in u for a in answers for u in a.unplaced)


def test_the_strict_and_relaxed_simulators_of_one_read_answer_as_separate_ones() -> None:
    objects = _busy_cluster()
    strict, relaxed = simulators(objects, TYPES, SchedulerOptions())
    for names in (["n1"], ["n2", "n4"], ["n1", "n2", "n3", "n4"]):
        candidates = [_candidate(n) for n in names]
        assert relaxed(candidates) == _fresh(objects, candidates, relax=True), names
        assert strict(candidates) == _fresh(objects, candidates, relax=False), names
