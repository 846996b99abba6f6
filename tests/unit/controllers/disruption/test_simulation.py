"""Where a candidate's pods would go without it: onto other nodes' room first, then onto new
NodeClaims (its replacements); pods that need a home anyway (unbound, or on a draining node)
take their room first, so two commands never promise the same room twice."""

from __future__ import annotations

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
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
