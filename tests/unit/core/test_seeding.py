"""The assignment LP that seeds NodeClaims (``seeding``), and seeded plans: every hard
constraint kept, the same plan for the same pods, never dearer than the balanced pass alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.core.pods import Pod
from karpy.core.resources import Resources
from karpy.core.scheduling import scheduler, seeding
from karpy.core.scheduling.options import SchedulerOptions
from karpy.testing.catalogs import realistic_instance_types
from tests.unit.core import builders as b
from tests.unit.core.validate import check

CATALOG = realistic_instance_types(seed=1)
GPU = b.instance_type("gpu.xlarge", 8, 32, price=3.0, extra={"nvidia.com/gpu": "1"})
CPU = b.instance_type("c.2xlarge", 8, 16, price=0.4)


def _gpu_mix() -> list[Pod]:
    plain = b.pods(30, prefix="web", cpu="1", memory="1Gi")
    train = b.pods(3, prefix="train", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "1"})
    return plain + train


def test_the_pattern_lp_keeps_plain_pods_off_the_gpu_type() -> None:
    pending = _gpu_mix()
    snap = b.snapshot([b.nodepool()], (GPU, CPU))
    solver = scheduler.Solver(snap, pending, SchedulerOptions(), scheduler.SEEDED)
    index = solver.pools[0]
    shapes = [(solver.context(c).vector, len(c.pods)) for c in solver.classes]
    found = seeding.patterns(index, shapes, index.full)
    assert found is not None
    gpu = [p for p in found.patterns if index.types[p.type_index].name == "gpu.xlarge"]
    # Three GPU nodes hold the training pods (and web pods beside them); the rest of the web
    # pods go on compute nodes, never on a fourth GPU node.
    assert 2.9 < sum(p.nodes for p in gpu) <= 3.0 + 1e-6
    held = [0.0] * len(shapes)
    for p in found.patterns:
        for s, count in p.pods:
            held[s] += count * p.nodes
    assert all(h >= n - 1e-6 for h, (_, n) in zip(held, shapes, strict=True))


def test_a_pattern_lp_started_from_a_plan_costs_no_more_than_it() -> None:
    pending = _gpu_mix()
    snap = b.snapshot([b.nodepool()], (GPU, CPU))
    balanced = scheduler.Solver(snap, pending, SchedulerOptions(), scheduler.BALANCED)
    balanced.run()
    index = balanced.pools[0]
    vectors = sorted(
        {balanced.pod_context[p.uid].vector for c in balanced.fleet.claims for p in c.pods}
    )
    shape_of = {v: s for s, v in enumerate(vectors)}
    counts = [0] * len(vectors)
    hints = []
    for node in scheduler.patterns(balanced):
        hints.append([(shape_of[v], n) for v, n in node.items()])
        for v, n in node.items():
            counts[shape_of[v]] += n
    found = seeding.patterns(index, list(zip(vectors, counts, strict=True)), index.full, hints)
    assert found is not None
    assert found.price <= balanced.price() + 1e-6


def test_a_seeded_plan_keeps_every_constraint_and_costs_no_more() -> None:
    pending = _gpu_mix()
    snap = b.snapshot([b.nodepool()], (GPU, CPU))
    results = b.run(snap, pending)
    check(snap, pending, results, 60)
    balanced = scheduler.Solver(snap, pending, SchedulerOptions(), scheduler.BALANCED)
    balanced.run()
    assert results.price <= balanced.price() + 1e-9


@settings(max_examples=10, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 30), st.integers(1, 48), st.integers(1, 40)),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from((None, 64, 256)),
)
def test_seeded_solves_keep_every_hard_constraint(
    shapes: list[tuple[int, int, int]], cpu_limit: int | None
) -> None:
    pending: list[Pod] = []
    for k, (cpu, memory, count) in enumerate(shapes):
        pending += b.pods(count, prefix=f"s{k}", cpu=f"{cpu * 100}m", memory=f"{memory * 128}Mi")
    limits = Resources.of({"cpu": cpu_limit}) if cpu_limit else Resources()
    snap = b.snapshot([b.nodepool(limits=limits)], CATALOG)
    solver = scheduler.Solver(snap, pending, SchedulerOptions(), scheduler.SEEDED)
    solver.run()
    results = solver.results(solver.price())
    check(snap, pending, results, 60)
    again = scheduler.Solver(snap, list(reversed(pending)), SchedulerOptions(), scheduler.SEEDED)
    again.run()
    assert results == again.results(again.price())


def test_pods_in_many_shapes_are_seeded_by_the_assignment_lp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Past PATTERN_SHAPES the seeded pass opens the assignment LP's NodeClaims instead.
    monkeypatch.setattr(scheduler, "PATTERN_SHAPES", 1)
    pending = _gpu_mix() + b.pods(12, prefix="big", cpu="3", memory="12Gi")
    snap = b.snapshot([b.nodepool()], (GPU, CPU, *CATALOG))
    solver = scheduler.Solver(snap, pending, SchedulerOptions(), scheduler.SEEDED)
    solver.seed_pass()
    assert not solver.seeded  # no node patterns
    assert sum(len(c.pods) for c in solver.fleet.claims) > 0  # the assignment LP's claims
    solver.first_pass()
    solver.retry_loop()
    results = solver.results(solver.price())
    check(snap, pending, results, 60)
    again = scheduler.Solver(snap, list(reversed(pending)), SchedulerOptions(), scheduler.SEEDED)
    again.run()
    assert results == again.results(again.price())
