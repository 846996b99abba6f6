"""Properties of solve(): whatever the input, the plan keeps every hard constraint.

Random small scenarios (NodePools with taints, requirements and limits; a catalog with varied
offerings; DaemonSets; existing nodes, some tainted, whose pods may bind host ports or keep pods
away with anti-affinity; pods with selectors, node-affinity terms, tolerations, spread,
anti-affinity by host and by zone, affinity and host ports) are solved and checked by an
independent validator, and solved twice for determinism.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.pods import (
    HostPort,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from karpy.core.resources import Resources
from karpy.core.scheduling import SchedulerOptions, pool, solve
from karpy.core.scheduling.cost import COST
from karpy.core.scheduling.scheduler import BALANCED, Solver
from karpy.core.snapshot import ClusterSnapshot, DaemonSet
from karpy.core.taints import Effect, Taint, Toleration
from tests.unit.core import builders as b
from tests.unit.core.validate import check

CPUS = ("100m", "250m", "500m", "1", "1500m", "3")
MEMS = ("64Mi", "256Mi", "1Gi", "3Gi")
TAINT = Taint("dedicated", Effect.NO_SCHEDULE, "batch")


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ClusterSnapshot, list[Pod], int]:
    types = []
    for i in range(draw(st.integers(1, 5))):
        zones = draw(st.lists(st.sampled_from(b.ZONES), min_size=1, max_size=3, unique=True))
        cts = draw(
            st.lists(
                st.sampled_from((wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)),
                min_size=1,
                max_size=2,
                unique=True,
            )
        )
        cpu = draw(st.sampled_from((1, 2, 4, 8)))
        types.append(
            b.instance_type(
                f"it-{i}",
                cpu,
                cpu * draw(st.sampled_from((1, 2, 4))),
                zones=zones,
                capacity_types=cts,
            )
        )
    pools = []
    for i in range(draw(st.integers(1, 2))):
        fields: dict[str, object] = {"weight": draw(st.integers(0, 3))}
        if draw(st.booleans()):
            fields["taints"] = (TAINT,)
        if draw(st.booleans()):
            fields["limits"] = Resources.of({"cpu": draw(st.sampled_from(("4", "16", "64")))})
        if draw(st.booleans()):
            fields["limits"] = Resources.of({"nodes": draw(st.integers(1, 4))})
        if draw(st.integers(0, 2)) == 0:  # a cost cap, alone or beside a cpu limit
            cap = Resources.of({COST: draw(st.sampled_from(("0.5", "1", "2.5", "6")))})
            limits = fields.get("limits")
            before = dict(limits) if isinstance(limits, Resources) else {}
            fields["limits"] = Resources.milli({**before, **cap})
        pool_reqs = []
        if draw(st.booleans()):
            ct = draw(st.sampled_from((wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)))
            pool_reqs.append(b.req(wk.LABEL_CAPACITY_TYPE, "In", ct))
        if draw(st.integers(0, 3)) == 0:
            mv = draw(st.integers(1, 3))
            pool_reqs.append(b.req(wk.LABEL_INSTANCE_TYPE, "Exists", min_values=mv))
        fields["requirements"] = b.reqs(*pool_reqs)
        pools.append(b.nodepool(f"pool-{i}", **fields))
    daemonsets = []
    for i in range(draw(st.integers(0, 2))):
        ds_fields: dict[str, object] = {"cpu": draw(st.sampled_from(("100m", "250m", "500m")))}
        if draw(st.booleans()):
            ds_fields["tolerations"] = (Toleration("dedicated", value="batch"),)
        placement = draw(st.sampled_from(("everywhere", "selector", "terms")))
        cts = draw(st.permutations((wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)))
        if placement == "selector":
            ds_fields["node_selector"] = {wk.LABEL_CAPACITY_TYPE: cts[0]}
        elif placement == "terms":  # ORed terms: the second may match where the first does not
            ds_fields["required_node_affinity"] = tuple(
                b.reqs(b.req(wk.LABEL_CAPACITY_TYPE, "In", ct)) for ct in cts
            )
        ds_pod = b.pod(f"ds-{i}", **ds_fields)  # type: ignore[arg-type]
        daemonsets.append(DaemonSet("kube-system", f"ds-{i}", ds_pod))
    nodes = []
    for i in range(draw(st.integers(0, 2))):
        existing = []
        for j in range(draw(st.integers(0, 2))):
            old: dict[str, object] = {"cpu": "500m", "labels": {"app": "web"}}
            extra = draw(st.sampled_from(("none", "port", "anti-host", "anti-zone")))
            if extra == "port":
                old["host_ports"] = (HostPort(8080),)
            elif extra != "none":
                key = wk.LABEL_HOSTNAME if extra == "anti-host" else wk.LABEL_TOPOLOGY_ZONE
                target = LabelSelector.of({"app": f"g{draw(st.integers(0, 3))}"})
                old["pod_anti_affinity"] = (PodAffinityTerm(target, key),)
            existing.append(b.pod(f"old-{i}-{j}", **old))  # type: ignore[arg-type]
        taints = (TAINT,) if draw(st.integers(0, 3)) == 0 else ()
        zone = draw(st.sampled_from(b.ZONES))
        nodes.append(b.node(f"node-{i}", zone=zone, pods_=existing, taints=taints))
    pending: list[Pod] = []
    for g in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(
                (
                    "plain",
                    "zone",
                    "terms",
                    "spread",
                    "hostspread",
                    "anti",
                    "zoneanti",
                    "affinity",
                    "port",
                    "toleration",
                )
            )
        )
        fields = {"cpu": draw(st.sampled_from(CPUS)), "memory": draw(st.sampled_from(MEMS))}
        labels = {"app": f"g{g}"}
        fields["labels"] = labels
        sel = LabelSelector.of(labels)
        if kind == "zone":
            fields["node_selector"] = {wk.LABEL_TOPOLOGY_ZONE: draw(st.sampled_from(b.ZONES))}
        elif kind == "terms":
            first = draw(st.sampled_from(("zone-z", *b.ZONES)))
            fields["required_node_affinity"] = (
                b.reqs(b.req(wk.LABEL_TOPOLOGY_ZONE, "In", first)),
                b.reqs(b.req(wk.LABEL_TOPOLOGY_ZONE, "In", draw(st.sampled_from(b.ZONES)))),
            )
        elif kind == "spread":
            fields["topology_spread"] = (TopologySpreadConstraint(wk.LABEL_TOPOLOGY_ZONE, 1, sel),)
        elif kind == "hostspread":
            fields["topology_spread"] = (TopologySpreadConstraint(wk.LABEL_HOSTNAME, 1, sel),)
        elif kind == "anti":
            fields["pod_anti_affinity"] = (PodAffinityTerm(sel, wk.LABEL_HOSTNAME),)
        elif kind == "zoneanti":
            fields["pod_anti_affinity"] = (PodAffinityTerm(sel, wk.LABEL_TOPOLOGY_ZONE),)
        elif kind == "affinity":
            fields["pod_affinity"] = (PodAffinityTerm(sel, wk.LABEL_TOPOLOGY_ZONE),)
        elif kind == "port":
            fields["host_ports"] = (HostPort(8080),)
        elif kind == "toleration":
            fields["tolerations"] = (Toleration("dedicated", value="batch"),)
        pending.extend(b.pods(draw(st.integers(1, 8)), prefix=f"g{g}", **fields))
    snap = b.snapshot(pools, types, nodes=nodes, daemonsets=daemonsets)
    return snap, pending, draw(st.integers(1, 4))


@given(scenarios())
def test_plans_keep_every_hard_constraint(case: tuple[ClusterSnapshot, list[Pod], int]) -> None:
    snap, pending, max_types = case
    results = b.run(snap, pending, max_instance_types=max_types)
    check(snap, pending, results, max_types)


@given(scenarios())
def test_best_effort_min_values_keeps_every_other_constraint(
    case: tuple[ClusterSnapshot, list[Pod], int],
) -> None:
    snap, pending, max_types = case
    strict = b.run(snap, pending, max_instance_types=max_types)
    best = b.run(snap, pending, max_instance_types=max_types, min_values_policy="BestEffort")
    check(snap, pending, best, max_types, strict_min_values=False)
    assert not any(c.min_values_relaxed for c in strict.nodeclaims)


@given(scenarios())
def test_same_input_same_output(case: tuple[ClusterSnapshot, list[Pod], int]) -> None:
    snap, pending, _ = case
    assert solve(snap, pending) == solve(snap, list(reversed(pending)))


@given(scenarios())
def test_improvement_never_raises_cost(case: tuple[ClusterSnapshot, list[Pod], int]) -> None:
    snap, pending, _ = case
    results = b.run(snap, pending)
    assert results.price <= results.greedy_price + 1e-9
    assert len(b.run(snap, pending, improve=False).placed()) == len(results.placed())


@given(scenarios())
def test_the_lower_bound_is_below_every_plan(case: tuple[ClusterSnapshot, list[Pod], int]) -> None:
    """The bound that lets the solver skip its improvement steps is below the greedy plan and
    the improved one alike (weak duality, checked on every scenario that has one)."""
    snap, pending, _ = case
    solver = Solver(snap, pending, SchedulerOptions(), BALANCED)
    solver.run()
    if solver.bound is None or any(cls.pods for cls in solver.classes):
        return
    assert solver.bound <= solver.price() * (1 + 1e-9) + 1e-9
    solver.improve()
    assert solver.bound <= solver.price() * (1 + 1e-9) + 1e-9


@given(scenarios())
def test_skipping_the_improvement_costs_at_most_its_tolerance(
    case: tuple[ClusterSnapshot, list[Pod], int],
) -> None:
    snap, pending, _ = case
    exact = b.run(snap, pending, improve_tolerance=0.0)
    quick = b.run(snap, pending, improve_tolerance=0.05)
    assert len(quick.placed()) == len(exact.placed())
    if not exact.unplaced:
        assert quick.price <= exact.price * 1.05 + 1e-9


@given(scenarios())
def test_a_kept_index_plans_as_a_fresh_one(case: tuple[ClusterSnapshot, list[Pod], int]) -> None:
    snap, pending, _ = case
    kept = solve(snap, pending)
    pool.forget_indexes()
    assert solve(snap, pending) == kept
