"""The property tests' validator must catch broken plans: each test breaks one hard constraint in
a plan by hand and expects the validator to name it. A validator that passes everything would
make the properties vacuous."""

from __future__ import annotations

import attrs
import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.pods import HostPort, LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from karpy.core.requirements import Requirement
from karpy.core.resources import Resources
from karpy.core.scheduling import NodeClaimPlan, Nomination, Results
from karpy.core.snapshot import ClusterSnapshot, DaemonSet
from karpy.core.taints import Effect, Taint
from tests.unit.core import builders as b
from tests.unit.core.validate import check

ZONE = wk.LABEL_TOPOLOGY_ZONE
HOST = wk.LABEL_HOSTNAME


def _nominate(snap: ClusterSnapshot, placements: dict[Pod, str]) -> None:
    """Check a hand-made plan that nominates each pod onto the named existing node."""
    results = Results((), tuple(Nomination(p.uid, n) for p, n in placements.items()), (), 0.0)
    check(snap, list(placements), results, 60)


def _relist(snap: ClusterSnapshot, claim: NodeClaimPlan, names: tuple[str, ...]) -> NodeClaimPlan:
    """``claim`` listing other instance types, with its requirement and price to match."""
    first = next(t for t in snap.instance_types[claim.nodepool] if t.name == names[0])
    price = min(o.price for o in first.offerings if o.zone in claim.zones)
    reqs = claim.requirements.without(wk.LABEL_INSTANCE_TYPE).add(
        Requirement(wk.LABEL_INSTANCE_TYPE, False, frozenset(names))
    )
    return attrs.evolve(claim, instance_types=names, requirements=reqs, price=price)


def _merge_claims(results: Results) -> Results:
    """Every pod of the plan moved onto its first NodeClaim."""
    first, *rest = results.nodeclaims
    pods = first.pods + tuple(u for c in rest for u in c.pods)
    return attrs.evolve(results, nodeclaims=(attrs.evolve(first, pods=pods),))


def test_the_solvers_own_plan_passes() -> None:
    snap = b.snapshot(nodes=[b.node("n1", cpu="1")])
    pending = b.pods(5, cpu="500m")
    check(snap, pending, b.run(snap, pending), 60)


def test_host_port_conflict_on_a_nodeclaim() -> None:
    snap = b.snapshot()
    pending = b.pods(2, host_ports=(HostPort(80),))
    results = b.run(snap, pending)
    assert len(results.nodeclaims) == 2
    with pytest.raises(AssertionError, match="both bind 80"):
        check(snap, pending, _merge_claims(results), 60)


def test_host_port_conflict_with_an_existing_pod() -> None:
    old = b.pod("old", host_ports=(HostPort(80, host_ip="10.0.0.1"),))
    snap = b.snapshot(nodes=[b.node("n1", pods_=[old])])
    with pytest.raises(AssertionError, match="both bind 80"):
        _nominate(snap, {b.pod(host_ports=(HostPort(80),)): "n1"})


def test_nomination_onto_an_untolerated_taint() -> None:
    tainted = b.node("n1", taints=(Taint("gpu", Effect.NO_SCHEDULE),))
    with pytest.raises(AssertionError, match="despite taint"):
        _nominate(b.snapshot(nodes=[tainted]), {b.pod(): "n1"})


def test_nomination_onto_a_starting_node_ignores_its_startup_taint() -> None:
    startup = Taint("agent-not-ready", Effect.NO_SCHEDULE)
    pool = b.nodepool(startup_taints=(startup,))
    starting = b.node("n1", taints=(startup,), nodepool_name="default", initialized=False)
    _nominate(b.snapshot([pool], nodes=[starting]), {b.pod(): "n1"})


def test_nomination_against_a_node_selector() -> None:
    snap = b.snapshot(nodes=[b.node("n1", zone="zone-a")])
    with pytest.raises(AssertionError, match="nodeSelector"):
        _nominate(snap, {b.pod(node_selector={ZONE: "zone-b"}): "n1"})


def test_nomination_against_every_required_node_affinity_term() -> None:
    snap = b.snapshot(nodes=[b.node("n1", zone="zone-a")])
    terms = (b.reqs(b.req(ZONE, "In", "zone-b")), b.reqs(b.req(ZONE, "In", "zone-c")))
    with pytest.raises(AssertionError, match="required node affinity"):
        _nominate(snap, {b.pod(required_node_affinity=terms): "n1"})
    either = (terms[0], b.reqs(b.req(ZONE, "In", "zone-a")))
    _nominate(snap, {b.pod(required_node_affinity=either): "n1"})


def test_nomination_that_overcommits_the_node() -> None:
    snap = b.snapshot(nodes=[b.node("n1", cpu="1", pods_=[b.pod("old", cpu="600m")])])
    with pytest.raises(AssertionError, match="overcommitted"):
        _nominate(snap, {b.pod(cpu="500m"): "n1"})


def test_nodeclaim_outside_its_nodepools_requirements() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(ZONE, "In", "zone-a")))
    snap = b.snapshot([pool])
    pending = [b.pod()]
    (claim,) = b.run(snap, pending).nodeclaims
    widened = claim.requirements.without(ZONE).add(Requirement(ZONE, True))
    broken = attrs.evolve(claim, requirements=widened, zones=("zone-a", "zone-b"))
    with pytest.raises(AssertionError, match=f"breaks its nodepool's {ZONE}"):
        check(snap, pending, Results((broken,), (), (), 0.0), 60)


def test_nodeclaim_listing_a_type_not_sold_in_its_zone() -> None:
    types = [b.instance_type("near", 2, 4), b.instance_type("far", 4, 8, zones=("zone-c",))]
    snap = b.snapshot(types=types)
    pending = [b.pod(node_selector={ZONE: "zone-a"})]
    (claim,) = b.run(snap, pending).nodeclaims
    assert claim.instance_types == ("near",)
    broken = _relist(snap, claim, ("near", "far"))
    with pytest.raises(AssertionError, match="far"):
        check(snap, pending, Results((broken,), (), (), 0.0), 60)


def test_nodeclaim_too_small_for_its_pods_and_daemonsets() -> None:
    ds = DaemonSet("kube-system", "agent", b.pod("agent", cpu="1"))
    snap = b.snapshot(daemonsets=[ds])
    pending = [b.pod(cpu="1500m")]
    (claim,) = b.run(snap, pending).nodeclaims
    assert claim.instance_types[0] == "it-4"
    broken = _relist(snap, claim, ("it-2",))
    with pytest.raises(AssertionError, match="overflow it-2"):
        check(snap, pending, Results((broken,), (), (), 0.0), 60)


def test_hostname_anti_affinity_broken_on_a_nodeclaim() -> None:
    snap = b.snapshot()
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), HOST)
    pending = b.pods(2, labels={"app": "x"}, pod_anti_affinity=(anti,))
    results = b.run(snap, pending)
    with pytest.raises(AssertionError, match="despite anti-affinity"):
        check(snap, pending, _merge_claims(results), 60)


def test_an_existing_pods_zonal_anti_affinity() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), ZONE)
    guard = b.pod("guard", pod_anti_affinity=(anti,))
    snap = b.snapshot(nodes=[b.node("n1", pods_=[guard]), b.node("n2", zone="zone-a")])
    with pytest.raises(AssertionError, match="despite anti-affinity"):
        _nominate(snap, {b.pod(labels={"app": "x"}): "n2"})


def test_zonal_spread_skew() -> None:
    spread = TopologySpreadConstraint(ZONE, 1, LabelSelector.of({"app": "s"}))
    snap = b.snapshot(nodes=[b.node("n1"), b.node("n2", zone="zone-b")])
    pods = b.pods(3, labels={"app": "s"}, topology_spread=(spread,))
    _nominate(snap, {pods[0]: "n1", pods[1]: "n2"})
    with pytest.raises(AssertionError, match="has skew 2"):
        _nominate(snap, dict.fromkeys(pods[:2], "n1"))


def test_spread_counts_only_the_pods_namespace() -> None:
    spread = TopologySpreadConstraint(ZONE, 1, LabelSelector.of({"app": "s"}))
    others = [b.pod(f"o{i}", labels={"app": "s"}, namespace="other") for i in range(3)]
    snap = b.snapshot(nodes=[b.node("n1", pods_=others), b.node("n2", zone="zone-b")])
    _nominate(snap, {b.pod(labels={"app": "s"}, topology_spread=(spread,)): "n1"})


def test_self_affine_group_split_over_zones() -> None:
    term = PodAffinityTerm(LabelSelector.of({"app": "a"}), ZONE)
    snap = b.snapshot(nodes=[b.node("n1"), b.node("n2", zone="zone-b")])
    pods = b.pods(2, labels={"app": "a"}, pod_affinity=(term,))
    _nominate(snap, dict.fromkeys(pods, "n1"))
    with pytest.raises(AssertionError, match="split"):
        _nominate(snap, {pods[0]: "n1", pods[1]: "n2"})


def test_nodepool_limit() -> None:
    pool = b.nodepool(limits=Resources.of({"cpu": "2"}))
    snap = b.snapshot([pool])
    pending = [b.pod(cpu="1500m")]
    (claim,) = b.run(snap, pending).nodeclaims
    with pytest.raises(AssertionError, match="over its cpu limit"):
        check(snap, pending, Results((_relist(snap, claim, ("it-4",)),), (), (), 0.0), 60)
