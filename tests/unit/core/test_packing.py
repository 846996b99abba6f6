"""Packing quality on a realistic catalog, and the pieces that give it: the covering LP, the
balanced first-pass order and the Karpenter-order baseline. Cost comparisons here are on fixed,
seeded inputs (plans, not timings); the benchmark in benchmarks/ measures the rest."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod
from karpy.core.resources import Resources
from karpy.core.scheduling import Packing, preferences, repack, scheduler, solve
from karpy.core.scheduling.lp import covering_lp
from karpy.core.scheduling.options import SchedulerOptions
from karpy.core.scheduling.queue import PodClass, balanced_order
from karpy.core.scheduling.results import NodeClaimPlan
from karpy.testing.catalogs import realistic_instance_types
from tests.unit.core import builders as b
from tests.unit.core.validate import check

CATALOG = realistic_instance_types(seed=1)


def _plain(count: int, seed: int) -> list[Pod]:
    rng = random.Random(seed)  # noqa: S311 - seeded test data
    return [
        b.pod(
            f"p-{i}",
            cpu=f"{rng.randint(1, 30) * 100}m",
            memory=f"{rng.randint(1, 48) * 128}Mi",
            owner=f"rs/{i}",
        )
        for i in range(count)
    ]


def _lp_bound(pods: list[Pod]) -> float:
    names = ("cpu", "memory", "pods")
    demand = [float(sum(p.requests().get_amount(n) for p in pods)) for n in names]
    columns = [
        [it.allocatable.get_amount(n) / d for n, d in zip(names, demand, strict=True)]
        for it in CATALOG
    ]
    prices = [min(o.price for o in it.offerings) for it in CATALOG]
    found = covering_lp(columns, prices, [1.0, 1.0, 1.0])
    assert found is not None
    return found.cost


def test_balanced_packing_beats_the_karpenter_order_on_a_realistic_catalog() -> None:
    pending = _plain(1500, seed=7)
    snap = b.snapshot([b.nodepool()], CATALOG)
    balanced = solve(snap, pending, SchedulerOptions())
    karpenter = solve(snap, pending, SchedulerOptions(packing=Packing.KARPENTER))
    assert not balanced.unplaced
    assert not karpenter.unplaced
    bound = _lp_bound(pending)
    # Karpenter's order fills compute-optimised and then memory-optimised 32xlarge amd64 nodes;
    # the balanced, steered pass stays on the cheap arm64 types in the batch's shape.
    assert karpenter.price > bound * 1.25
    assert balanced.price < bound * 1.05
    assert balanced.price < karpenter.price * 0.85


def test_karpenter_baseline_orders_by_cpu_then_memory_and_takes_the_first_fit() -> None:
    # 1.5 CPU, 1 CPU, 1 CPU with more memory: Karpenter's queue order is big, wide, small, and
    # first fit puts all three on the first NodeClaim while it has room.
    big = b.pod("big", cpu="1500m", memory="1Gi")
    small = b.pod("small", cpu="1", memory="1Gi")
    wide = b.pod("wide", cpu="1", memory="2Gi")
    results = b.run(b.snapshot(), [small, wide, big], packing="karpenter")
    assert not results.unplaced
    assert len({b.claim_of(results, p) for p in (big, small, wide)}) == 1


def test_covering_lp_buys_the_cheapest_mix() -> None:
    # Two resources; a CPU type (4 cpu, 2 mem, 1.0) and a memory type (1 cpu, 4 mem, 1.0).
    # Demand 5 cpu and 5 mem: 4x + y = 5 and 2x + 4y = 5 give x = 15/14, y = 10/14, cost
    # 25/14; the duals price the demand at exactly the optimum (strong duality).
    found = covering_lp([[4.0, 2.0], [1.0, 4.0]], [1.0, 1.0], [5.0, 5.0])
    assert found is not None
    assert found.cost == pytest.approx(25 / 14)
    assert found.amounts == pytest.approx((15 / 14, 10 / 14))
    assert sum(d * 5.0 for d in found.duals) == pytest.approx(25 / 14)


def test_covering_lp_is_none_when_a_demanded_resource_is_sold_by_no_type() -> None:
    assert covering_lp([[1.0, 0.0]], [1.0], [1.0, 1.0]) is None


def _classes(shapes: list[tuple[str, str, int]]) -> list[PodClass]:
    out = []
    for k, (cpu, memory, count) in enumerate(shapes):
        members = b.pods(count, prefix=f"c{k}", cpu=cpu, memory=memory)
        state = preferences.start(members[0], preferences.PreferencePolicy.RESPECT)
        out.append(PodClass(members[0], members, members[0].requests(), state))
    return out


def test_balanced_order_starts_large_and_keeps_every_prefix_near_the_batch_shape() -> None:
    classes = _classes([("4", "1Gi", 10), ("250m", "8Gi", 10), ("1", "2Gi", 10)])
    order = balanced_order(classes)
    assert sorted(order) == sorted(ci for ci, c in enumerate(classes) for _ in c.pods)
    assert order[0] == 0  # the largest pod first
    cpu = [c.requests.get_amount("cpu") for c in classes]
    mem = [c.requests.get_amount("memory") for c in classes]
    tau = sum(m * 10 for m in mem) / sum(c * 10 for c in cpu)
    lean = 0.0
    biggest = max(max(m, c * tau) for c, m in zip(cpu, mem, strict=True))
    for ci in order:
        lean += mem[ci] - tau * cpu[ci]
        assert abs(lean) <= biggest  # never more than one pod's worth off balance


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.integers(1, 64), st.integers(1, 6)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from((None, 64, 256)),
    st.sampled_from((None, wk.ARCH_AMD64)),
    st.sampled_from(tuple(Packing)),
)
def test_realistic_catalog_plans_keep_every_hard_constraint(
    shapes: list[tuple[int, int, int]], cpu_limit: int | None, arch: str | None, packing: Packing
) -> None:
    pending: list[Pod] = []
    for k, (cpu, memory, count) in enumerate(shapes):
        fields: dict[str, object] = {}
        if arch is not None and k % 2:
            fields["node_selector"] = ((wk.LABEL_ARCH, arch),)
        pending += b.pods(
            count, prefix=f"s{k}", cpu=f"{cpu * 100}m", memory=f"{memory * 256}Mi", **fields
        )
    limits = Resources.of({"cpu": cpu_limit}) if cpu_limit else Resources()
    snap = b.snapshot([b.nodepool(limits=limits)], CATALOG)
    results = b.run(snap, pending, packing=packing)
    check(snap, pending, results, 60)
    assert results == b.run(snap, list(reversed(pending)), packing=packing)


def _charge(plans: Sequence[NodeClaimPlan]) -> int:
    """CPU (milli) NodeClaims charge their NodePool's limits: each one's largest option."""
    by_name = {it.name: it for it in CATALOG}
    return sum(
        max(by_name[t].capacity.get_amount("cpu") for t in plan.instance_types) for plan in plans
    )


def test_repacking_the_worst_shaped_nodeclaims_lowers_the_plan() -> None:
    pending = _plain(3000, seed=11)
    snap = b.snapshot([b.nodepool()], CATALOG)
    greedy, _ = scheduler._solve_balanced(snap, pending, SchedulerOptions())
    repacked = solve(snap, pending, SchedulerOptions())
    check(snap, pending, repacked, 60)
    assert repacked.price < greedy.price
    assert repacked.price < _lp_bound(pending) * 1.03
    assert repacked == solve(snap, list(reversed(pending)), SchedulerOptions())


def test_repacking_stays_within_the_nodepool_limits_and_leaves_existing_nodes_alone() -> None:
    pending = _plain(1200, seed=3)
    free = b.snapshot([b.nodepool()], CATALOG)
    greedy, _ = scheduler._solve_balanced(free, pending, SchedulerOptions())
    # A CPU limit at exactly what the unrepacked plan charges, plus one existing node that
    # takes part of the batch: repacked windows may use only what is left.
    limit = _charge(greedy.nodeclaims) + 16_000
    existing = b.node("old", cpu="16", memory="64Gi", nodepool_name="default")
    snap = b.snapshot(
        [b.nodepool(limits=Resources.milli({"cpu": limit}))], CATALOG, nodes=[existing]
    )
    results = solve(snap, pending, SchedulerOptions())
    check(snap, pending, results, 60)
    assert _charge(results.nodeclaims) + 16_000 <= limit
    assert results.nominations  # the existing node still takes its share first


def test_the_rest_of_the_plan_and_existing_nodes_count_against_a_window_limits() -> None:
    pool = b.nodepool(limits=Resources.of({"cpu": "100", "nodes": "5"}))
    existing = b.node("old", cpu="8", memory="32Gi", nodepool_name="default")
    snap = b.snapshot([pool], CATALOG, nodes=[existing])
    kept = solve(b.snapshot([b.nodepool()], CATALOG), _plain(40, seed=5)).nodeclaims[:1]
    rest = repack._rest(snap, list(kept))
    assert rest.nodes == ()
    (left,) = rest.nodepools
    largest = _charge(kept)
    assert left.limits.get_amount("cpu") == max(0, 100_000 - 8_000 - largest)
    assert left.limits.get_amount("nodes") == 3_000
