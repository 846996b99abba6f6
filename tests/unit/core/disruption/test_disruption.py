"""The pure disruption pass: candidate rules, disruption cost, Emptiness, StaticDrift and Drift,
Karpenter's method order, and properties over random fleets: no command exceeds a budget, a
do-not-disrupt node or pod is never a graceful candidate, a busy node is never deleted without
its pods placed, and the same input gives the same commands."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.candidates import (
    Candidate,
    NodeFacts,
    PodFacts,
    PoolDisruption,
    SkipReason,
    disruption_cost,
    eviction_cost,
    lifetime_remaining,
    select,
)
from karpy.core.disruption.decision import disrupt, pool_counts
from karpy.core.disruption.methods import (
    Decision,
    Drift,
    Emptiness,
    Reason,
    Simulation,
    StaticDrift,
)
from karpy.core.requirements import Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling.results import NodeClaimPlan

NOW = 1_800_000_000.0
POOL = "default"
W30 = PoolDisruption(consolidate_after=30.0, budgets=(BudgetSpec(nodes="100%"),))
POOLS = {POOL: W30}
DRIFT_ONLY = (Emptiness(), StaticDrift(), Drift())


def node(
    name: str,
    *,
    idle: float = 60.0,
    pods: int | tuple[PodFacts, ...] = 0,
    consolidate_after: float = 30.0,
    **changes: Any,
) -> NodeFacts:
    """An initialized, Ready NodeClaim of POOL idle for `idle` seconds with `pods` pods (a
    count, or the pods themselves), Consolidatable as the nodeclaim.disruption controller marks
    it under a NodePool whose consolidateAfter is `consolidate_after` (W30's by default)."""
    if isinstance(pods, int):
        pods = tuple(PodFacts(name=f"ns/{name}-{i}", uid=f"{name}-{i}") for i in range(pods))
    base = NodeFacts(
        nodeclaim=name,
        node=f"node-{name}",
        nodepool=POOL,
        created_at=NOW - idle - 200,
        initialized_at=NOW - idle - 100,
        last_pod_event_time=NOW - idle,
        consolidatable=idle >= consolidate_after,
        pods=pods,
    )
    return attrs.evolve(base, **changes)


def plan(name: str) -> NodeClaimPlan:
    return NodeClaimPlan(
        name=name,
        nodepool=POOL,
        requirements=Requirements(),
        instance_types=("m5.large",),
        zones=("a",),
        capacity_types=("on-demand",),
        requests=Resources(),
        pods=(),
        price=0.1,
    )


def fits(candidates: Sequence[Candidate]) -> Simulation:
    """Every pod fits on one new NodeClaim per candidate."""
    return Simulation(plans=tuple(plan(f"new-{c.name}") for c in candidates))


def nowhere(candidates: Sequence[Candidate]) -> Simulation:
    return Simulation(unplaced=tuple(p.name for c in candidates for p in c.facts.pods))


def run(
    nodes: Sequence[NodeFacts], pools: dict[str, PoolDisruption] | None = None, **kw: Any
) -> Any:
    return disrupt(nodes, POOLS if pools is None else pools, now=NOW, simulate=fits, **kw)


# ---------------------------------------------------------------- candidates


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        pytest.param(node("a", nodepool=None), SkipReason.UNMANAGED, id="unmanaged"),
        pytest.param(node("a", nodepool="gone"), SkipReason.NODEPOOL_NOT_FOUND, id="no-pool"),
        pytest.param(node("a", initialized_at=None), SkipReason.NOT_INITIALIZED, id="new"),
        pytest.param(node("a", node=None), SkipReason.NOT_INITIALIZED, id="unregistered"),
        pytest.param(node("a", deleting=True), SkipReason.DELETING, id="deleting"),
        pytest.param(node("a", disrupting=True), SkipReason.DISRUPTING, id="in-a-command"),
        pytest.param(node("a", nominated=True), SkipReason.NOMINATED, id="nominated"),
        pytest.param(node("a", do_not_disrupt=True), SkipReason.DO_NOT_DISRUPT, id="node-dnd"),
        pytest.param(
            node("a", pods=(PodFacts(name="ns/p", uid="p", do_not_disrupt_until=math.inf),)),
            SkipReason.POD_DO_NOT_DISRUPT,
            id="pod-dnd",
        ),
        pytest.param(
            node("a", pods=(PodFacts(name="ns/p", uid="p", do_not_disrupt_until=NOW + 1),)),
            SkipReason.POD_DO_NOT_DISRUPT,
            id="pod-dnd-duration-running",
        ),
        pytest.param(
            node("a", pods=(PodFacts(name="ns/p", uid="p", blocking_pdb="ns/pdb"),)),
            SkipReason.PDB,
            id="pdb",
        ),
    ],
)
def test_candidate_filter(facts: NodeFacts, reason: SkipReason) -> None:
    selection = select([facts], POOLS, now=NOW)
    assert selection.candidates == ()
    assert [(s.nodeclaim, s.reason) for s in selection.skipped] == [("a", reason)]


def test_a_do_not_disrupt_duration_that_has_passed_no_longer_protects() -> None:
    pod = PodFacts(name="ns/p", uid="p", do_not_disrupt_until=NOW - 1)
    assert [c.name for c in select([node("a", pods=(pod,))], POOLS, now=NOW).candidates] == ["a"]


def test_forceful_selection_ignores_do_not_disrupt_and_pdbs() -> None:
    pod = PodFacts(name="ns/p", uid="p", do_not_disrupt_until=math.inf, blocking_pdb="ns/pdb")
    facts = [node("a", do_not_disrupt=True), node("b", pods=(pod,))]
    assert len(select(facts, POOLS, now=NOW, graceful=False).candidates) == 2


def test_disruption_cost_is_karpenters() -> None:
    assert eviction_cost(PodFacts(name="p", uid="p")) == 1.0
    assert eviction_cost(PodFacts(name="p", uid="p", deletion_cost=2.0**27)) == 2.0
    assert eviction_cost(PodFacts(name="p", uid="p", priority=2**25 * 100)) == 10.0
    assert eviction_cost(PodFacts(name="p", uid="p", priority=-(2**25) * 100)) == -10.0
    half = node("a", pods=2, created_at=NOW - 50, expire_after=100.0)
    assert lifetime_remaining(half, now=NOW) == 0.5
    assert disruption_cost(half, now=NOW) == 1.0
    assert lifetime_remaining(node("a", expire_after=None), now=NOW) == 1.0
    assert lifetime_remaining(node("a", created_at=NOW - 500, expire_after=100.0), now=NOW) == 0


def test_candidates_come_cheapest_to_disrupt_first() -> None:
    facts = [node("busy", pods=3), node("idle"), node("some", pods=1)]
    assert [c.name for c in select(facts, POOLS, now=NOW).candidates] == ["idle", "some", "busy"]


def test_budgets_count_initialized_nodes_and_the_disrupting_ones() -> None:
    counts = pool_counts(
        [
            node("a"),
            node("b", deleting=True),
            node("c", disrupting=True),
            node("d", ready=False),
            node("e", initialized_at=None),
            node("f", nodepool=None),
        ]
    )
    assert counts[POOL].total == 4
    assert counts[POOL].disrupting == 3


# ---------------------------------------------------------------- emptiness


def test_emptiness_deletes_every_empty_consolidatable_node_in_one_command() -> None:
    decision = run([node("a"), node("b", idle=500), node("busy", pods=1)])
    assert decision.outcome.method == "emptiness"
    (command,) = decision.outcome.commands
    assert command.names == ("b", "a")  # longest empty first
    assert command.decision is Decision.DELETE
    assert command.reason is Reason.EMPTY


@pytest.mark.parametrize(
    ("pool", "reason"),
    [
        (PoolDisruption(consolidate_after=None), SkipReason.CONSOLIDATION_DISABLED),
        (PoolDisruption(consolidate_after=None, error="bad"), SkipReason.INVALID_CONSOLIDATE_AFTER),
        (PoolDisruption(consolidate_after=120.0), SkipReason.NOT_CONSOLIDATABLE),
        (
            PoolDisruption(consolidate_after=0.0, budgets=(BudgetSpec(nodes="0"),)),
            SkipReason.BUDGET,
        ),
    ],
)
def test_emptiness_is_held_back(pool: PoolDisruption, reason: SkipReason) -> None:
    decision = run([node("a", consolidate_after=pool.consolidate_after or 0.0)], {POOL: pool})
    assert decision.outcome.commands == ()
    assert [(s.nodeclaim, s.reason) for s in decision.outcome.skipped] == [("a", reason)]


def test_a_budget_for_another_reason_does_not_hold_emptiness_back() -> None:
    pool = PoolDisruption(
        consolidate_after=0.0, budgets=(BudgetSpec(nodes="0", reasons=frozenset({"Drifted"})),)
    )
    assert run([node("a")], {POOL: pool}).outcome.commands


def test_nodes_already_disrupting_use_up_the_budget() -> None:
    pool = PoolDisruption(consolidate_after=30.0, budgets=(BudgetSpec(nodes="2"),))
    facts = [node("young", idle=40), node("old", idle=400), node("gone", deleting=True)]
    decision = run(facts, {POOL: pool})
    assert [c.names for c in decision.outcome.commands] == [("old",)]
    assert [s.nodeclaim for s in decision.outcome.skipped] == ["young"]
    assert "Empty" in decision.outcome.skipped[0].message


def test_static_pools_are_not_emptied() -> None:
    pool = attrs.evolve(W30, static=True)
    assert run([node("a")], {POOL: pool}).outcome.commands == ()


# ---------------------------------------------------------------- drift


def test_drift_deletes_every_empty_drifted_node_first() -> None:
    facts = [
        node("d-busy", pods=1, drifted="NodePoolDrifted"),
        node("d-empty", drifted="AMIDrift", idle=1),
        node("d-empty2", drifted="AMIDrift", idle=1),
    ]
    pools = {POOL: PoolDisruption(consolidate_after=None, budgets=(BudgetSpec(nodes="100%"),))}
    decision = run(facts, pools)
    assert decision.outcome.method == "drift"
    (command,) = decision.outcome.commands
    assert set(command.names) == {"d-empty", "d-empty2"}
    assert command.decision is Decision.DELETE


def test_drift_replaces_one_busy_node_per_pass_replacement_first() -> None:
    facts = [node("a", pods=2, drifted="NodePoolDrifted"), node("b", pods=1, drifted="X")]
    decision = run(facts)
    (command,) = decision.outcome.commands
    assert command.names == ("b",)  # cheaper to disrupt
    assert command.decision is Decision.REPLACE
    assert [p.name for p in command.replacements] == ["new-b"]


def test_drift_skips_a_node_whose_pods_would_not_schedule() -> None:
    facts = [node("a", pods=1, drifted="NodePoolDrifted")]
    decision = disrupt(facts, POOLS, now=NOW, simulate=nowhere, methods=DRIFT_ONLY)
    assert decision.outcome.commands == ()
    (skip,) = decision.outcome.skipped
    assert skip.reason is SkipReason.UNSCHEDULABLE
    assert skip.blocked


def test_a_zero_drift_budget_blocks_drift_and_says_so() -> None:
    pool = PoolDisruption(
        consolidate_after=None, budgets=(BudgetSpec(nodes="0", reasons=frozenset({"Drifted"})),)
    )
    decision = run([node("a", pods=1, drifted="NodePoolDrifted")], {POOL: pool}, methods=DRIFT_ONLY)
    assert decision.outcome.commands == ()
    (skip,) = decision.outcome.skipped
    assert skip.reason is SkipReason.BUDGET
    assert "Drifted" in skip.message


def test_emptiness_wins_the_pass_over_drift() -> None:
    decision = run([node("empty"), node("drifted", pods=1, drifted="NodePoolDrifted")])
    assert decision.outcome.method == "emptiness"


def test_static_drift_replaces_from_the_template() -> None:
    pool = attrs.evolve(W30, static=True)
    decision = run(
        [node("a", pods=1, drifted="NodePoolDrifted"), node("b", drifted="X")], {POOL: pool}
    )
    assert decision.outcome.method == "static-drift"
    assert [(c.names, c.from_template) for c in decision.outcome.commands] == [
        (("b",), 1),
        (("a",), 1),
    ]


# ---------------------------------------------------------------- properties

pods_strategy = st.lists(
    st.builds(
        PodFacts,
        name=st.uuids().map(str),
        uid=st.just("u"),
        priority=st.integers(-1000, 1000),
        do_not_disrupt_until=st.sampled_from([None, None, math.inf, NOW - 1, NOW + 1]),
        blocking_pdb=st.sampled_from([None, None, None, "ns/pdb"]),
    ),
    max_size=3,
).map(tuple)
nodes_strategy = st.lists(
    st.builds(
        NodeFacts,
        nodeclaim=st.uuids().map(str),
        node=st.sampled_from(["n", "n", None]),
        nodepool=st.sampled_from([POOL, "other", None]),
        created_at=st.floats(NOW - 5000, NOW),
        initialized_at=st.one_of(st.none(), st.floats(NOW - 500, NOW)),
        last_pod_event_time=st.one_of(st.none(), st.floats(NOW - 500, NOW)),
        expire_after=st.sampled_from([None, 3600.0]),
        ready=st.booleans(),
        deleting=st.booleans(),
        disrupting=st.booleans(),
        do_not_disrupt=st.booleans(),
        nominated=st.booleans(),
        drifted=st.sampled_from([None, None, "NodePoolDrifted"]),
        consolidatable=st.booleans(),
        pods=pods_strategy,
    ),
    max_size=12,
    unique_by=lambda n: n.nodeclaim,
)
pools_strategy = st.builds(
    PoolDisruption,
    consolidate_after=st.one_of(st.none(), st.sampled_from([0.0, 30.0, 300.0])),
    budgets=st.lists(
        st.builds(
            BudgetSpec,
            nodes=st.sampled_from(["0", "1", "2", "10%", "50%", "100%"]),
            reasons=st.sampled_from([frozenset(), frozenset({"Empty"}), frozenset({"Drifted"})]),
        ),
        max_size=3,
    ).map(tuple),
    static=st.booleans(),
)
simulations = st.sampled_from([fits, nowhere])


def _limit(nodes: str, total: int) -> int:
    """Independent restatement of a budget's limit: integer, or percentage rounded up."""
    if nodes.endswith("%"):
        return -(-int(nodes[:-1]) * total // 100)
    return int(nodes)


@given(nodes_strategy, pools_strategy, pools_strategy, simulations)
def test_properties(
    nodes: list[NodeFacts], pool: PoolDisruption, other: PoolDisruption, simulate: Any
) -> None:
    pools = {POOL: pool, "other": other}
    decision = disrupt(nodes, pools, now=NOW, simulate=simulate)
    again = disrupt(nodes, pools, now=NOW, simulate=simulate)
    assert decision == again, "same input, same commands"
    chosen = [c for command in decision.outcome.commands for c in command.candidates]
    assert len({c.name for c in chosen}) == len(chosen), "a node is in one command at most"
    for candidate in chosen:
        facts = candidate.facts
        assert not facts.deleting
        assert not facts.disrupting
        assert not facts.nominated
        assert facts.initialized_at is not None
        assert facts.node is not None
        assert not facts.do_not_disrupt, "do-not-disrupt nodes are never graceful candidates"
        for pod in facts.pods:
            assert pod.blocking_pdb is None
            assert pod.do_not_disrupt_until is None or pod.do_not_disrupt_until <= NOW
    for command in decision.outcome.commands:
        if command.decision is Decision.DELETE:
            assert all(c.facts.empty for c in command.candidates), "busy nodes are replaced"
    for name, settings in pools.items():
        members = [n for n in nodes if n.nodepool == name and n.initialized_at is not None]
        for reason in Reason:
            active = [b for b in settings.budgets if not b.reasons or reason.value in b.reasons]
            limit = min([len(members)] + [_limit(b.nodes, len(members)) for b in active])
            already = sum(m.deleting or m.disrupting or not m.ready for m in members)
            started = sum(
                c.nodepool == name
                for command in decision.outcome.commands
                if command.reason is reason
                for c in command.candidates
            )
            assert started <= max(0, limit - already), "no command exceeds a budget"
