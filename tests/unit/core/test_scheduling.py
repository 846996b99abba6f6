"""One test per scheduling constraint: each shows the solver honouring it."""

from __future__ import annotations

from collections import Counter

from karpy.apis.v1 import labels as wk
from karpy.core.pods import (
    Container,
    HostPort,
    InclusionPolicy,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
)
from karpy.core.resources import Resources
from karpy.core.scheduling import Results, SchedulerOptions, solve
from karpy.core.scheduling.improve import dissolve
from karpy.core.scheduling.scheduler import BALANCED, Solver
from karpy.core.snapshot import DaemonSet
from karpy.core.taints import Effect, Taint, Toleration, TolerationOperator
from tests.unit.core import builders as b

ZONE = wk.LABEL_TOPOLOGY_ZONE
HOST = wk.LABEL_HOSTNAME


def _zone_of(results: Results, claim_name: str | None) -> str:
    claim = next(c for c in results.nodeclaims if c.name == claim_name)
    assert len(claim.zones) == 1
    return claim.zones[0]


def test_a_pod_gets_a_nodeclaim_with_the_cheapest_fitting_types_first() -> None:
    p = b.pod(cpu="1500m", memory="1Gi")
    results = b.run(b.snapshot(), [p])
    (claim,) = results.nodeclaims
    assert claim.instance_types[0] == "it-2"
    assert "it-1" not in claim.instance_types
    assert claim.price == min(o.price for o in b.catalog()[1].offerings)


def test_node_selector_pins_the_zone() -> None:
    p = b.pod(node_selector={ZONE: "zone-b"})
    (claim,) = b.run(b.snapshot(), [p]).nodeclaims
    assert claim.zones == ("zone-b",)


def test_required_node_affinity_falls_back_to_the_next_term() -> None:
    impossible = b.reqs(b.req(ZONE, "In", "zone-z"))
    possible = b.reqs(b.req(ZONE, "In", "zone-c"))
    p = b.pod(required_node_affinity=(impossible, possible))
    (claim,) = b.run(b.snapshot(), [p]).nodeclaims
    assert claim.zones == ("zone-c",)


def test_preferred_node_affinity_is_honoured_when_possible_and_dropped_when_not() -> None:
    good = PreferredSchedulingTerm(10, b.reqs(b.req(ZONE, "In", "zone-a")))
    bad = PreferredSchedulingTerm(50, b.reqs(b.req(ZONE, "In", "zone-z")))
    honoured = b.pod(preferred_node_affinity=(good,))
    relaxed = b.pod(preferred_node_affinity=(bad,))
    results = b.run(b.snapshot(), [honoured, relaxed])
    assert _zone_of(results, b.claim_of(results, honoured)) == "zone-a"
    assert b.claim_of(results, relaxed) is not None


def test_ignore_preference_policy_drops_preferences_at_the_start() -> None:
    pref = PreferredSchedulingTerm(10, b.reqs(b.req(ZONE, "In", "zone-b")))
    p = b.pod(preferred_node_affinity=(pref,))
    (claim,) = b.run(b.snapshot(), [p], preference_policy="Ignore").nodeclaims
    assert len(claim.zones) == 3


def test_untolerated_nodepool_taint_sends_the_pod_to_another_pool() -> None:
    tainted = b.nodepool("gpu", weight=100, taints=(Taint("gpu", Effect.NO_SCHEDULE),))
    plain = b.nodepool("general")
    results = b.run(b.snapshot([tainted, plain]), [b.pod()])
    assert [c.nodepool for c in results.nodeclaims] == ["general"]


def test_tolerated_taint_lets_the_heavier_pool_win() -> None:
    tainted = b.nodepool("gpu", weight=100, taints=(Taint("gpu", Effect.NO_SCHEDULE),))
    plain = b.nodepool("general")
    p = b.pod(tolerations=(Toleration("gpu", TolerationOperator.EXISTS),))
    assert [c.nodepool for c in b.run(b.snapshot([tainted, plain]), [p]).nodeclaims] == ["gpu"]


def test_prefer_no_schedule_taint_is_tolerated_as_the_last_relaxation() -> None:
    soft = b.nodepool("soft", taints=(Taint("maybe", Effect.PREFER_NO_SCHEDULE),))
    results = b.run(b.snapshot([soft]), [b.pod()])
    assert len(results.nodeclaims) == 1


def test_startup_taints_do_not_block_a_starting_node() -> None:
    startup = Taint("agent-not-ready", Effect.NO_SCHEDULE)
    pool = b.nodepool(startup_taints=(startup,))
    starting = b.node("n1", taints=(startup,), nodepool_name="default", initialized=False)
    results = b.run(b.snapshot([pool], nodes=[starting]), [b.pod()])
    assert [n.node for n in results.nominations] == ["n1"]


def test_existing_nodes_are_used_before_new_nodeclaims() -> None:
    results = b.run(b.snapshot(nodes=[b.node("n1")]), b.pods(3))
    assert not results.nodeclaims
    assert {n.node for n in results.nominations} == {"n1"}


def test_initialized_nodes_are_tried_before_starting_and_in_flight_ones() -> None:
    # Names sort the other way round, so only readiness explains the order.
    in_flight = b.node("a-in-flight", initialized=False, in_flight=True)
    starting = b.node("b-starting", initialized=False)
    ready = b.node("c-ready")
    snap = b.snapshot(nodes=[in_flight, starting, ready])
    for count, expected in ((1, {"c-ready"}), (2, {"c-ready", "b-starting"})):
        results = b.run(snap, b.pods(count, cpu="3"))
        assert {n.node for n in results.nominations} == expected
        assert not results.nodeclaims
    results = b.run(snap, b.pods(3, cpu="3"))
    assert {n.node for n in results.nominations} == {"a-in-flight", "b-starting", "c-ready"}


def test_an_in_flight_node_is_used_instead_of_a_new_nodeclaim() -> None:
    launching = b.node("launching", initialized=False, in_flight=True, nodepool_name="default")
    results = b.run(b.snapshot(nodes=[launching]), b.pods(2, cpu="1"))
    assert not results.nodeclaims
    assert [n.node for n in results.nominations] == ["launching", "launching"]


def test_an_extended_resource_goes_only_to_types_that_have_it() -> None:
    gpu = "nvidia.com/gpu"
    types = [
        *b.catalog(),
        b.instance_type("g-1", 4, 16, price=1.0, extra={gpu: "1"}),
        b.instance_type("g-4", 16, 64, price=4.0, extra={gpu: "4"}),
    ]
    snap = b.snapshot(types=types)
    one, two = b.pod("one", extra={gpu: "1"}), b.pod("two", extra={gpu: "2"})
    results = b.run(snap, [one, two, b.pod("plain")])
    assert b.claim_of(results, one) == b.claim_of(results, two)
    (claim,) = [c for c in results.nodeclaims if one.uid in c.pods]
    assert claim.instance_types == ("g-4",)
    assert claim.requests.get_amount(gpu) == 3000
    alone = b.run(snap, [b.pod(extra={gpu: "1"})]).nodeclaims
    assert [c.instance_types for c in alone] == [("g-1", "g-4")]
    assert b.run(snap, [b.pod(extra={gpu: "5"})]).unplaced


def test_existing_node_capacity_counts_its_pods() -> None:
    full = b.node("n1", cpu="1", pods_=[b.pod("old", cpu="900m")])
    results = b.run(b.snapshot(nodes=[full]), [b.pod(cpu="500m")])
    assert not results.nominations
    assert len(results.nodeclaims) == 1


def test_nodepools_are_tried_by_weight() -> None:
    low = b.nodepool("low", weight=1)
    high = b.nodepool("high", weight=10)
    assert [c.nodepool for c in b.run(b.snapshot([low, high]), [b.pod()]).nodeclaims] == ["high"]


def test_nodepool_cpu_limit_moves_pods_to_the_next_pool() -> None:
    limited = b.nodepool("limited", weight=10, limits=Resources.of({"cpu": "4"}))
    spare = b.nodepool("spare")
    results = b.run(b.snapshot([limited, spare]), b.pods(12, cpu="1"))
    pools = Counter(c.nodepool for c in results.nodeclaims)
    assert pools["spare"] >= 1
    limited_cpu = sum(
        max(t.capacity.get_amount("cpu") for t in b.catalog() if t.name in c.instance_types)
        for c in results.nodeclaims
        if c.nodepool == "limited"
    )
    assert limited_cpu <= 4000


def test_limits_charge_only_the_types_a_nodeclaims_pods_leave_it() -> None:
    # Each pod fits only it-2 (2 CPUs); charging a NodeClaim the 8-CPU type it could have been
    # before its pod narrowed it would stop the pool after one NodeClaim.
    limited = b.nodepool(limits=Resources.of({"cpu": "8"}))
    small = b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "In", "it-1", "it-2"))
    pending = b.pods(4, cpu="1500m", required_node_affinity=(small,))
    results = b.run(b.snapshot([limited]), pending)
    assert not results.unplaced
    assert [c.instance_types for c in results.nodeclaims] == [("it-2",)] * 4


def test_limits_are_refunded_when_a_later_pod_narrows_a_nodeclaim() -> None:
    # "big" opens a NodeClaim that could still be it-4 (charged 4 CPUs, all of the limit);
    # "small" joins it and narrows it to it-2, which frees 2 CPUs for "apart", which may not
    # share a node with "big".
    limited = b.nodepool(limits=Resources.of({"cpu": "4"}))
    big = b.pod("big", cpu="900m", labels={"app": "big"})
    only_small = b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "In", "it-1", "it-2"))
    small = b.pod("small", cpu="800m", required_node_affinity=(only_small,))
    away = PodAffinityTerm(LabelSelector.of({"app": "big"}), HOST)
    apart = b.pod("apart", cpu="600m", pod_anti_affinity=(away,))
    results = b.run(b.snapshot([limited]), [big, small, apart])
    assert not results.unplaced
    assert b.claim_of(results, big) == b.claim_of(results, small) != b.claim_of(results, apart)
    assert sorted(c.instance_types for c in results.nodeclaims) == [("it-1", "it-2"), ("it-2",)]


def test_nodepool_node_limit_is_exact() -> None:
    pool = b.nodepool(limits=Resources.of({"nodes": 2}))
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), HOST)
    results = b.run(b.snapshot([pool]), b.pods(3, labels={"app": "x"}, pod_anti_affinity=(anti,)))
    assert len(results.nodeclaims) == 2
    assert len(results.unplaced) == 1


def test_effective_requests_count_sidecars_and_overhead() -> None:
    sidecar = Container("proxy", Resources.of({"cpu": "1"}), restart_always=True)
    p = b.pod(cpu="500m", init_containers=(sidecar,), overhead=Resources.of({"cpu": "250m"}))
    (claim,) = b.run(b.snapshot(), [p]).nodeclaims
    assert claim.requests.get_amount("cpu") == 1750


def test_daemonset_overhead_sizes_the_nodeclaim() -> None:
    ds = DaemonSet("kube-system", "agent", b.pod("agent", cpu="1", memory="1Gi"))
    (claim,) = b.run(b.snapshot(daemonsets=[ds]), [b.pod(cpu="500m")]).nodeclaims
    assert claim.instance_types[0] == "it-2"
    assert claim.requests.get_amount("cpu") == 1500


def test_daemonset_counts_when_a_later_node_affinity_term_matches_the_pool() -> None:
    on_demand = b.req(wk.LABEL_CAPACITY_TYPE, "In", wk.CAPACITY_TYPE_ON_DEMAND)
    pool = b.nodepool(requirements=b.reqs(on_demand))
    spot_only = b.reqs(b.req(wk.LABEL_CAPACITY_TYPE, "In", wk.CAPACITY_TYPE_SPOT))
    terms = (spot_only, b.reqs(on_demand))  # ORed: the second term admits the pool's nodes
    ds = DaemonSet("kube-system", "agent", b.pod("agent", cpu="1", required_node_affinity=terms))
    (claim,) = b.run(b.snapshot([pool], daemonsets=[ds]), [b.pod(cpu="1500m")]).nodeclaims
    assert claim.requests.get_amount("cpu") == 2500
    assert claim.instance_types[0] == "it-4"


def test_daemonset_whose_node_affinity_terms_all_miss_the_pool_adds_nothing() -> None:
    pool = b.nodepool(
        labels={"team": "a"},
        requirements=b.reqs(b.req(wk.LABEL_CAPACITY_TYPE, "In", "on-demand")),
    )
    terms = (b.reqs(b.req(wk.LABEL_CAPACITY_TYPE, "In", "spot")), b.reqs(b.req("team", "In", "b")))
    ds = DaemonSet("kube-system", "agent", b.pod("agent", cpu="1", required_node_affinity=terms))
    (claim,) = b.run(b.snapshot([pool], daemonsets=[ds]), [b.pod(cpu="500m")]).nodeclaims
    assert claim.requests.get_amount("cpu") == 500


def test_daemonset_not_tolerating_the_pool_adds_nothing() -> None:
    pool = b.nodepool(taints=(Taint("t", Effect.NO_SCHEDULE),))
    ds = DaemonSet("kube-system", "agent", b.pod("agent", cpu="1"))
    p = b.pod(cpu="500m", tolerations=(Toleration("t", TolerationOperator.EXISTS),))
    (claim,) = b.run(b.snapshot([pool], daemonsets=[ds]), [p]).nodeclaims
    assert claim.requests.get_amount("cpu") == 500


def test_zonal_spread_balances_zones() -> None:
    sel = LabelSelector.of({"app": "web"})
    spread = TopologySpreadConstraint(ZONE, 1, sel)
    web = b.pods(9, labels={"app": "web"}, topology_spread=(spread,))
    results = b.run(b.snapshot(), web)
    zones = Counter(_zone_of(results, b.claim_of(results, p)) for p in web)
    assert sorted(zones.values()) == [3, 3, 3]


def test_zonal_spread_counts_existing_pods() -> None:
    sel = LabelSelector.of({"app": "web"})
    old = [b.pod(f"old-{i}", labels={"app": "web"}) for i in range(2)]
    existing = b.node("n1", zone="zone-a", cpu="1", pods_=old)
    spread = TopologySpreadConstraint(ZONE, 1, sel)
    web = b.pods(4, labels={"app": "web"}, topology_spread=(spread,))
    results = b.run(b.snapshot(nodes=[existing]), web)
    zones = Counter(_zone_of(results, b.claim_of(results, p)) for p in web)
    assert zones["zone-a"] == 0
    assert zones["zone-b"] == zones["zone-c"] == 2


def test_spread_counts_only_pods_in_the_pods_own_namespace() -> None:
    # Three matching pods in another namespace sit in zone-a; spread never looks across
    # namespaces, so the pending pods still take one zone each.
    spread = TopologySpreadConstraint(ZONE, 1, LabelSelector.of({"app": "s"}))
    others = [b.pod(f"o{i}", namespace="other", labels={"app": "s"}) for i in range(3)]
    crowded = b.node("n1", zone="zone-a", pods_=others)
    pending = b.pods(3, labels={"app": "s"}, topology_spread=(spread,))
    results = b.run(b.snapshot(nodes=[crowded]), pending)
    zones = []
    for p in pending:
        where = b.claim_of(results, p)
        zones.append("zone-a" if where == "n1" else _zone_of(results, where))
    assert sorted(zones) == ["zone-a", "zone-b", "zone-c"]
    # Moved into the pods' namespace, the same three pods push them out of zone-a.
    mine = [b.pod(f"m{i}", labels={"app": "s"}) for i in range(3)]
    results = b.run(b.snapshot(nodes=[b.node("n1", zone="zone-a", pods_=mine)]), pending)
    assert "n1" not in results.placed().values()
    assert all(_zone_of(results, c.name) != "zone-a" for c in results.nodeclaims)


def test_hostname_spread_puts_one_pod_per_node_at_max_skew_one() -> None:
    spread = TopologySpreadConstraint(HOST, 1, LabelSelector.of({"app": "x"}))
    results = b.run(b.snapshot(), b.pods(4, labels={"app": "x"}, topology_spread=(spread,)))
    assert len(results.nodeclaims) == 4


def test_min_domains_forces_spreading_when_domains_are_few() -> None:
    sel = LabelSelector.of({"app": "x"})
    spread = TopologySpreadConstraint(ZONE, 2, sel, min_domains=4)
    pool = b.nodepool(requirements=b.reqs(b.req(ZONE, "In", "zone-a")))
    results = b.run(b.snapshot([pool]), b.pods(5, labels={"app": "x"}, topology_spread=(spread,)))
    assert len(results.placed()) == 2
    assert len(results.unplaced) == 3


def test_schedule_anyway_spread_is_relaxed() -> None:
    spread = TopologySpreadConstraint(
        ZONE, 1, LabelSelector.of({"app": "x"}), WhenUnsatisfiable.SCHEDULE_ANYWAY, min_domains=9
    )
    pool = b.nodepool(requirements=b.reqs(b.req(ZONE, "In", "zone-a")))
    results = b.run(b.snapshot([pool]), b.pods(3, labels={"app": "x"}, topology_spread=(spread,)))
    assert len(results.placed()) == 3


def test_node_affinity_policy_ignore_counts_domains_the_pod_cannot_use() -> None:
    sel = LabelSelector.of({"app": "x"})
    honor = TopologySpreadConstraint(ZONE, 1, sel)
    ignore = TopologySpreadConstraint(ZONE, 1, sel, node_affinity_policy=InclusionPolicy.IGNORE)
    labels, selector = {"app": "x"}, {ZONE: "zone-a"}
    honoured = b.run(
        b.snapshot(), b.pods(3, topology_spread=(honor,), labels=labels, node_selector=selector)
    )
    ignored = b.run(
        b.snapshot(), b.pods(3, topology_spread=(ignore,), labels=labels, node_selector=selector)
    )
    assert len(honoured.placed()) == 3
    assert len(ignored.placed()) == 1


def test_node_taints_policy_honor_skips_domains_of_untolerated_pools() -> None:
    sel = LabelSelector.of({"app": "x"})
    tainted = b.nodepool(
        "tainted",
        taints=(Taint("t", Effect.NO_SCHEDULE),),
        requirements=b.reqs(b.req(ZONE, "In", "zone-c")),
    )
    open_ = b.nodepool("open", requirements=b.reqs(b.req(ZONE, "In", "zone-a", "zone-b")))
    honor = TopologySpreadConstraint(ZONE, 1, sel, node_taints_policy=InclusionPolicy.HONOR)
    ignore = TopologySpreadConstraint(ZONE, 1, sel)
    snap = b.snapshot([tainted, open_])
    assert len(b.run(snap, b.pods(4, labels={"app": "x"}, topology_spread=(honor,))).placed()) == 4
    assert len(b.run(snap, b.pods(4, labels={"app": "x"}, topology_spread=(ignore,))).placed()) == 2


def test_match_label_keys_split_spread_groups_by_label_value() -> None:
    spread = TopologySpreadConstraint(
        HOST, 1, LabelSelector.of({"app": "x"}), match_label_keys=("rev",)
    )
    v1 = b.pods(2, "v1", labels={"app": "x", "rev": "1"}, topology_spread=(spread,))
    v2 = b.pods(2, "v2", labels={"app": "x", "rev": "2"}, topology_spread=(spread,))
    results = b.run(b.snapshot(), v1 + v2)
    assert len(results.nodeclaims) == 2


def test_spread_over_capacity_type() -> None:
    types = [b.instance_type("it", 4, 8, capacity_types=("spot", "on-demand"))]
    spread = TopologySpreadConstraint(wk.LABEL_CAPACITY_TYPE, 1, LabelSelector.of({"app": "x"}))
    results = b.run(
        b.snapshot(types=types), b.pods(4, labels={"app": "x"}, topology_spread=(spread,))
    )
    kinds = Counter(c.capacity_types for c in results.nodeclaims for _ in c.pods)
    assert kinds == Counter({("on-demand",): 2, ("spot",): 2})


def test_anti_affinity_over_a_custom_nodepool_label() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req("example.com/rack", "In", "r1", "r2")))
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), "example.com/rack")
    results = b.run(b.snapshot([pool]), b.pods(3, labels={"app": "x"}, pod_anti_affinity=(anti,)))
    racks = sorted(
        c.requirements.single_value("example.com/rack") or "" for c in results.nodeclaims
    )
    assert racks == ["r1", "r2"]
    assert len(results.unplaced) == 1


def test_anti_affinity_over_a_label_no_node_has_is_met_trivially() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), "example.com/nowhere")
    results = b.run(b.snapshot(), b.pods(3, labels={"app": "x"}, pod_anti_affinity=(anti,)))
    assert len(results.nodeclaims) == 1
    assert len(results.placed()) == 3


def test_spread_over_a_label_no_node_has_cannot_be_met() -> None:
    spread = TopologySpreadConstraint("example.com/nowhere", 1, LabelSelector.of({"app": "x"}))
    results = b.run(b.snapshot(), b.pods(2, labels={"app": "x"}, topology_spread=(spread,)))
    assert not results.placed()
    assert "no example.com/nowhere label on the node" in results.unplaced[0].message


def test_zonal_pod_affinity_follows_the_target() -> None:
    target = b.pod("db", labels={"app": "db"}, node_selector={ZONE: "zone-c"})
    term = PodAffinityTerm(LabelSelector.of({"app": "db"}), ZONE)
    followers = b.pods(3, cpu="2", pod_affinity=(term,))
    results = b.run(b.snapshot(), [*followers, target])
    for p in followers:
        assert _zone_of(results, b.claim_of(results, p)) == "zone-c"


def test_hostname_pod_affinity_shares_the_nodeclaim() -> None:
    target = b.pod("db", labels={"app": "db"}, cpu="3")
    term = PodAffinityTerm(LabelSelector.of({"app": "db"}), HOST)
    follower = b.pod("cache", pod_affinity=(term,))
    results = b.run(b.snapshot(), [follower, target])
    assert b.claim_of(results, follower) == b.claim_of(results, target)


def test_preferred_pod_affinity_is_dropped_when_it_cannot_be_met() -> None:
    term = WeightedPodAffinityTerm(10, PodAffinityTerm(LabelSelector.of({"app": "none"}), ZONE))
    results = b.run(b.snapshot(), [b.pod(preferred_pod_affinity=(term,))])
    assert len(results.placed()) == 1


def test_hostname_anti_affinity_separates_pods() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), HOST)
    results = b.run(b.snapshot(), b.pods(3, labels={"app": "x"}, pod_anti_affinity=(anti,)))
    assert len(results.nodeclaims) == 3


def test_zonal_anti_affinity_uses_each_zone_once() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), ZONE)
    results = b.run(b.snapshot(), b.pods(4, labels={"app": "x"}, pod_anti_affinity=(anti,)))
    zones = sorted(_zone_of(results, c.name) for c in results.nodeclaims)
    assert zones == ["zone-a", "zone-b", "zone-c"]
    assert len(results.unplaced) == 1


def test_preferred_anti_affinity_is_dropped_when_it_cannot_be_met() -> None:
    term = WeightedPodAffinityTerm(5, PodAffinityTerm(LabelSelector.of({"app": "x"}), ZONE))
    pool = b.nodepool(requirements=b.reqs(b.req(ZONE, "In", "zone-a")))
    pending = b.pods(2, labels={"app": "x"}, preferred_pod_anti_affinity=(term,))
    assert len(b.run(b.snapshot([pool]), pending).placed()) == 2


def test_existing_pods_anti_affinity_keeps_new_pods_away() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "web"}), HOST)
    guard = b.pod("guard", pod_anti_affinity=(anti,))
    existing = b.node("n1", pods_=[guard])
    web = b.pod("web", labels={"app": "web"})
    results = b.run(b.snapshot(nodes=[existing]), [web])
    assert not results.nominations
    assert len(results.nodeclaims) == 1


def test_anti_affinity_honours_namespace_selectors() -> None:
    sel = LabelSelector.of({"team": "a"})
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), HOST, namespace_selector=sel)
    mine = b.pod("mine", namespace="ns-a", labels={"app": "x"}, pod_anti_affinity=(anti,))
    other = b.pod("other", namespace="ns-b", labels={"app": "x"})
    snap = b.snapshot(namespaces={"ns-a": {"team": "a"}, "ns-b": {"team": "b"}})
    results = b.run(snap, [mine, other])
    assert b.claim_of(results, mine) == b.claim_of(results, other)


def test_host_ports_conflict_per_node() -> None:
    results = b.run(b.snapshot(), b.pods(2, host_ports=(HostPort(80),)))
    assert len(results.nodeclaims) == 2


def test_host_ports_on_different_ips_do_not_conflict() -> None:
    a = b.pod(host_ports=(HostPort(80, host_ip="10.0.0.1"),))
    c = b.pod(host_ports=(HostPort(80, host_ip="10.0.0.2"),))
    assert len(b.run(b.snapshot(), [a, c]).nodeclaims) == 1


def test_volume_topology_pins_the_volume_zone() -> None:
    p = b.pod(volume_requirements=(b.reqs(b.req(ZONE, "In", "zone-b")),))
    (claim,) = b.run(b.snapshot(), [p]).nodeclaims
    assert claim.zones == ("zone-b",)


def test_capacity_type_requirement_narrows_offerings() -> None:
    types = [b.instance_type("it", 2, 4, capacity_types=("spot", "on-demand"))]
    p = b.pod(node_selector={wk.LABEL_CAPACITY_TYPE: "spot"})
    (claim,) = b.run(b.snapshot(types=types), [p]).nodeclaims
    assert claim.capacity_types == ("spot",)


def test_unavailable_offerings_are_not_used() -> None:
    types = [b.instance_type("it", 2, 4, unavailable=[("zone-a", "on-demand")])]
    (claim,) = b.run(b.snapshot(types=types), [b.pod()]).nodeclaims
    assert "zone-a" not in claim.zones


def test_gt_requirement_filters_instance_types_by_label() -> None:
    types = [b.instance_type(f"it-{c}", c, 2 * c, labels={"cpus": str(c)}) for c in (1, 2, 4)]
    pool = b.nodepool(requirements=b.reqs(b.req("cpus", "Gt", "1")))
    (claim,) = b.run(b.snapshot([pool], types), [b.pod()]).nodeclaims
    assert claim.instance_types == ("it-2", "it-4")


def test_instance_types_are_cut_to_the_maximum() -> None:
    (claim,) = b.run(b.snapshot(), [b.pod()], max_instance_types=2).nodeclaims
    assert claim.instance_types == ("it-1", "it-2")


def test_min_values_keeps_enough_instance_types() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=3)))
    (claim,) = b.run(b.snapshot([pool]), [b.pod(cpu="3")]).nodeclaims
    assert len(claim.instance_types) == 3


def test_min_values_broken_by_the_cut_fails_the_pods() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=3)))
    results = b.run(b.snapshot([pool]), [b.pod()], max_instance_types=2)
    assert not results.nodeclaims
    assert "needs 3 values" in results.unplaced[0].message


def test_best_effort_min_values_places_the_pod_and_flags_the_nodeclaim() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=3)))
    snap = b.snapshot([pool])
    strict = b.run(snap, [b.pod(cpu="7")])
    best = b.run(snap, [b.pod(cpu="7")], min_values_policy="BestEffort")
    assert not strict.nodeclaims
    (claim,) = best.nodeclaims
    assert claim.min_values_relaxed
    assert claim.instance_types == ("it-8", "it-16")
    assert "relaxed minValues (BestEffort policy)" not in strict.unplaced[0].relaxations


def test_best_effort_min_values_still_prefers_keeping_them() -> None:
    pool = b.nodepool(requirements=b.reqs(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=2)))
    (claim,) = b.run(b.snapshot([pool]), [b.pod()], min_values_policy="BestEffort").nodeclaims
    assert not claim.min_values_relaxed


def test_the_cut_to_the_maximum_keeps_min_values_when_it_can() -> None:
    family = "example.com/family"
    types = [
        b.instance_type("a-1", 2, 4, price=0.1, labels={family: "a"}),
        b.instance_type("a-2", 4, 8, price=0.2, labels={family: "a"}),
        b.instance_type("b-1", 8, 16, price=0.4, labels={family: "b"}),
    ]
    pool = b.nodepool(requirements=b.reqs(b.req(family, "Exists", min_values=2)))
    (claim,) = b.run(b.snapshot([pool], types), [b.pod()], max_instance_types=2).nodeclaims
    assert claim.instance_types == ("a-1", "b-1")


def test_custom_label_from_the_nodepool_template_satisfies_a_selector() -> None:
    pool = b.nodepool(labels={"team": "a"})
    (claim,) = b.run(b.snapshot([pool]), [b.pod(node_selector={"team": "a"})]).nodeclaims
    assert claim.requirements.single_value("team") == "a"


def test_identical_pods_share_nodeclaims() -> None:
    # 40 x 100m is exactly the 4 CPUs of it-4 (the test catalog has no overhead).
    results = b.run(b.snapshot(), b.pods(40, cpu="100m"))
    assert len(results.nodeclaims) == 1
    assert results.nodeclaims[0].instance_types[0] == "it-4"


def test_improvement_moves_a_pod_that_tipped_a_nodeclaim_onto_a_bigger_type() -> None:
    # Greedy grows one claim to 9 CPUs (it-16); 6 + 3 on it-8 + it-4 is cheaper.
    # (The balanced pass alone: a whole solve also tries the seeded pass, whose pattern LP buys
    # three it-4 outright.)
    snap = b.snapshot()
    solver = Solver(snap, b.pods(3, cpu="3"), SchedulerOptions(), BALANCED)
    solver.run()
    greedy = solver.results(solver.price())
    solver.improve()
    improved = solver.results(greedy.price)
    assert [c.instance_types[0] for c in greedy.nodeclaims] == ["it-16"]
    assert sorted(c.instance_types[0] for c in improved.nodeclaims) == ["it-4", "it-8"]
    assert improved.price < greedy.price
    assert b.run(snap, b.pods(3, cpu="3")).price <= improved.price


def test_solve_is_deterministic() -> None:
    spread = TopologySpreadConstraint(ZONE, 1, LabelSelector.of({"app": "w"}))
    pending = b.pods(7, labels={"app": "w"}, topology_spread=(spread,)) + b.pods(5, "q", cpu="2")
    snap = b.snapshot()
    assert solve(snap, pending) == solve(snap, list(reversed(pending)))


def test_placed_pods_report_the_preferences_they_lost() -> None:
    bad = PreferredSchedulingTerm(50, b.reqs(b.req(ZONE, "In", "zone-z")))
    relaxed = b.pod("relaxed", preferred_node_affinity=(bad,))
    plain = b.pod("plain")
    results = b.run(b.snapshot(), [relaxed, plain])
    assert [(r.pod, r.steps) for r in results.relaxed] == [
        (relaxed.uid, ("dropped a preferred node affinity term",))
    ]


def test_a_pod_prefers_a_nodeclaim_it_fits_for_free() -> None:
    anti = PodAffinityTerm(LabelSelector.of({"app": "x"}), HOST)
    full = b.pod("full", cpu="8", labels={"app": "x"}, pod_anti_affinity=(anti,))
    roomy = b.pod("roomy", cpu="3", labels={"app": "x"}, pod_anti_affinity=(anti,))
    small = b.pod("small", cpu="500m")
    snap = b.snapshot()
    looked = b.run(snap, [full, roomy, small], improve=False)
    first_fit = b.run(snap, [full, roomy, small], improve=False, lookahead=0)
    assert b.claim_of(looked, small) == b.claim_of(looked, roomy)
    assert b.claim_of(first_fit, small) == b.claim_of(first_fit, full)
    assert looked.price < first_fit.price


def _one_claim_per_pod(pending: list[Pod]) -> Solver:
    """A solver whose greedy state has each pod on its own new NodeClaim (what the dissolve
    step starts from when earlier pods could not share)."""
    solver = Solver(b.snapshot(), pending, SchedulerOptions())
    for cls in solver.classes:
        ctx = solver.context(cls)
        for pod in cls.pods:
            opened = solver.fleet.new_claim(ctx)
            assert opened is not None
            claim, placement = opened
            claim.commit(placement, pod, ctx)
            solver.pod_context[pod.uid] = ctx
        cls.pods.clear()
    return solver


def _dissolve(solver: Solver) -> int:
    return dissolve(solver.fleet, solver.pod_context, solver.improve_budget)


def test_improvement_dissolves_a_nodeclaim_whose_pods_fit_elsewhere_for_less() -> None:
    # Two it-1 NodeClaims holding 400m each: one it-1 holds both for half the price.
    pending = b.pods(2, cpu="400m")
    solver = _one_claim_per_pod(pending)
    greedy = sum(c.price() for c in solver.fleet.claims)
    assert _dissolve(solver) == 1
    results = solver.results(greedy)
    (claim,) = results.nodeclaims
    assert set(claim.pods) == {p.uid for p in pending}
    assert claim.instance_types[0] == "it-1"
    assert results.price == greedy / 2


def test_improvement_keeps_nodeclaims_when_dissolving_saves_nothing() -> None:
    # 600m twice needs it-2, which costs as much as two it-1: every touched bin is restored.
    solver = _one_claim_per_pod(b.pods(2, cpu="600m"))
    before = [(c.mask, c.used, list(c.pods), c.requirements) for c in solver.fleet.claims]
    assert _dissolve(solver) == 0
    assert [(c.mask, c.used, list(c.pods), c.requirements) for c in solver.fleet.claims] == before


def test_improvement_never_dissolves_pods_with_host_ports() -> None:
    pending = [b.pod(f"p{i}", cpu="400m", host_ports=(HostPort(8000 + i),)) for i in range(2)]
    solver = _one_claim_per_pod(pending)
    assert _dissolve(solver) == 0
    assert all(len(c.pods) == 1 for c in solver.fleet.claims)
