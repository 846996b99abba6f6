"""One test per explanation reason: the blocking step names the right filter and counts."""

from __future__ import annotations

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.pods import HostPort, LabelSelector, PodAffinityTerm
from karpy.core.resources import Resources
from karpy.core.scheduling import Explanation, SchedulerOptions
from karpy.core.scheduling.results import ReasonKind
from karpy.core.scheduling.scheduler import Solver
from karpy.core.taints import Effect, Taint
from tests.unit.core import builders as b

ZONE = wk.LABEL_TOPOLOGY_ZONE


def _explain(snap, pod) -> Explanation:  # type: ignore[no-untyped-def]
    results = b.run(snap, [pod])
    assert not results.placed()
    (explanation,) = results.unplaced
    assert explanation.uid == pod.uid
    assert explanation.message.startswith(f"pod {pod.key} cannot be placed: ")
    return explanation


def _blocking(explanation: Explanation, pool: str = "default"):  # type: ignore[no-untyped-def]
    found = next(p for p in explanation.nodepools if p.nodepool == pool)
    step = found.blocking()
    assert step is not None
    return found, step


def test_untolerated_taint() -> None:
    pool = b.nodepool(taints=(Taint("gpu", Effect.NO_SCHEDULE, "true"),))
    e = _explain(b.snapshot([pool]), b.pod())
    found, step = _blocking(e)
    assert step.kind is ReasonKind.TAINT
    assert step.removed == found.instance_types == 5
    assert "gpu=true:NoSchedule" in e.message


def test_requirement_mismatch_on_a_template_label() -> None:
    pool = b.nodepool(labels={"team": "a"})
    e = _explain(b.snapshot([pool]), b.pod(node_selector={"team": "b"}))
    _, step = _blocking(e)
    assert step.kind is ReasonKind.REQUIREMENT
    assert "team In [b]" in step.detail
    assert "team In [a]" in step.detail


def test_instance_type_requirement_counts_types_per_key() -> None:
    pod = b.pod(node_selector={wk.LABEL_INSTANCE_TYPE: "it-99"})
    _, step = _blocking(_explain(b.snapshot(), pod))
    assert step.kind is ReasonKind.INSTANCE_TYPE_REQUIREMENT
    assert step.removed == 5
    assert f"{wk.LABEL_INSTANCE_TYPE} (5)" in step.detail


def test_nodepool_requirements_that_remove_some_types_are_reported() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "In", "it-1", "it-2")))
    found, step = _blocking(_explain(b.snapshot([pool]), b.pod(cpu="3")))
    first = found.steps[0]
    assert first.kind is ReasonKind.INSTANCE_TYPE_REQUIREMENT
    assert (first.removed, first.remaining) == (3, 2)
    assert step.kind is ReasonKind.RESOURCES


def test_offering_step_when_zone_and_capacity_type_never_meet() -> None:
    spot_b = b.instance_type(
        "it", 2, 4, zones=("zone-a", "zone-b"), capacity_types=("spot", "on-demand")
    )
    only = spot_b.__class__.make(
        "it",
        spot_b.capacity,
        [o for o in spot_b.offerings if not (o.zone == "zone-a" and o.capacity_type == "spot")],
    )
    pod = b.pod(node_selector={ZONE: "zone-a", wk.LABEL_CAPACITY_TYPE: "spot"})
    _, step = _blocking(_explain(b.snapshot(types=[only]), pod))
    assert step.kind is ReasonKind.OFFERING
    assert "zone-a" in step.detail


def test_insufficient_resources_names_the_resource() -> None:
    e = _explain(b.snapshot(), b.pod(cpu="64"))
    _, step = _blocking(e)
    assert step.kind is ReasonKind.RESOURCES
    assert "insufficient cpu (needs 64, 5 types too small)" in step.detail


def test_a_resource_no_type_has_is_said_to_be_missing_not_too_small() -> None:
    """A Security-Groups-for-Pods pod on types without ENI trunking: a bigger type of the same
    kind would not help, and the explanation says so."""
    e = _explain(b.snapshot(), b.pod(extra={"vpc.amazonaws.com/pod-eni": "1"}))
    _, step = _blocking(e)
    assert step.kind is ReasonKind.RESOURCES
    assert "insufficient vpc.amazonaws.com/pod-eni (needs 1, 5 types have none)" in step.detail
    assert "types have none" in e.message


def test_nodepool_limit() -> None:
    pool = b.nodepool(limits=Resources.of({"cpu": "500m"}))
    _, step = _blocking(_explain(b.snapshot([pool]), b.pod()))
    assert step.kind is ReasonKind.LIMIT
    assert "cpu=500m" in step.detail


def test_nodepool_node_limit() -> None:
    pool = b.nodepool(limits=Resources.of({"nodes": 0}))
    _, step = _blocking(_explain(b.snapshot([pool]), b.pod()))
    assert step.kind is ReasonKind.LIMIT
    assert "nodes=0 reached" in step.detail


def test_topology_rule() -> None:
    term = PodAffinityTerm(LabelSelector.of({"app": "nowhere"}), ZONE)
    _, step = _blocking(_explain(b.snapshot(), b.pod(pod_affinity=(term,))))
    assert step.kind is ReasonKind.TOPOLOGY
    assert "affinity" in step.detail


def test_host_port_conflict_on_an_existing_node() -> None:
    busy = b.node("n1", pods_=[b.pod("old", host_ports=(HostPort(80),))])
    pool = b.nodepool(taints=(Taint("closed", Effect.NO_SCHEDULE),))
    e = _explain(b.snapshot([pool], nodes=[busy]), b.pod(host_ports=(HostPort(80),)))
    assert [s.kind for s in e.existing_nodes] == [ReasonKind.HOST_PORT]
    assert e.existing_nodes[0].count == 1
    assert "existing nodes: 1 refused" in e.message


def test_volume_topology() -> None:
    pod = b.pod(volume_requirements=(b.reqs(b.req(ZONE, "In", "zone-z")),))
    _, step = _blocking(_explain(b.snapshot(), pod))
    assert step.kind is ReasonKind.VOLUME


def test_min_values() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=3)))
    _, step = _blocking(_explain(b.snapshot([pool]), b.pod(cpu="7")))
    assert step.kind is ReasonKind.MIN_VALUES
    assert "needs 3 values, 2 remain" in step.detail


def test_nodepool_requirements_that_remove_every_type() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "In", "none")))
    found, step = _blocking(_explain(b.snapshot([pool]), b.pod()))
    assert step.kind is ReasonKind.INSTANCE_TYPE_REQUIREMENT
    assert step.removed == found.instance_types == 5
    assert "nodepool requirements" in step.detail


def test_no_instance_types() -> None:
    snap = b.snapshot()
    bare = attrs.evolve(snap, instance_types={})
    found, step = _blocking(_explain(bare, b.pod()))
    assert step.kind is ReasonKind.NO_INSTANCE_TYPES
    assert found.instance_types == 0


def test_identical_pods_share_one_explanation() -> None:
    results = b.run(b.snapshot(), b.pods(3, cpu="64"))
    messages = [e.message for e in results.unplaced]
    assert len(messages) == 3
    assert len({m.split(": ", 1)[1] for m in messages}) == 1
    assert len({e.pod for e in results.unplaced}) == 3


def test_relaxation_steps_are_listed() -> None:
    pod = b.pod(cpu="64", required_node_affinity=(b.reqs(b.req(ZONE, "In", "zone-a")), b.reqs()))
    e = _explain(b.snapshot(), pod)
    assert "tried the next required node affinity term" in e.relaxations


def test_min_values_broken_at_the_final_cut_is_explained_per_nodepool() -> None:
    # The cut to the maximum runs once, when the plan is frozen; a maximum lowered after the
    # pod joined its NodeClaim stands in for a NodeClaim whose cut came out short.
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=2)))
    pod = b.pod(cpu="3")
    solver = Solver(b.snapshot([pool]), [pod], SchedulerOptions())
    solver.run()
    assert [len(c.pods) for c in solver.fleet.claims] == [1]
    solver.options = attrs.evolve(solver.options, max_instance_types=1)
    results = solver.results(0.0)
    assert not results.nodeclaims
    (e,) = results.unplaced
    found, step = _blocking(e)
    assert step.kind is ReasonKind.MIN_VALUES
    assert step.removed == found.instance_types == 5
    assert "instance-type needs 2 values, 1 remain after cutting to 1" in step.detail
    assert "3 instance types left" in step.detail
    assert e.message.startswith(f'pod {pod.key} cannot be placed: nodepool "default": ')
