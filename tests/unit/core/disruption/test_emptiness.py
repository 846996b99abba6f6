"""Emptiness candidate rules and budget capping, with properties: never more than the budget
allows, never a node with pods, never one before consolidateAfter has passed."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.emptiness import (
    Candidate,
    PoolDisruption,
    SkipReason,
    decide,
)

NOW = 1_800_000_000.0
POOL = "default"
WHEN_EMPTY_30S = PoolDisruption(consolidate_after=30.0, budgets=(BudgetSpec(nodes="100%"),))


def empty(name: str, *, idle: float = 60.0, **changes: Any) -> Candidate:
    """An initialized, empty NodeClaim of POOL idle for `idle` seconds."""
    base = Candidate(
        nodeclaim=name,
        node=f"node-{name}",
        nodepool=POOL,
        initialized_at=NOW - idle - 100,
        last_pod_event_time=NOW - idle,
        deleting=False,
        do_not_disrupt=False,
        reschedulable_pods=0,
    )
    return attrs.evolve(base, **changes)


def test_empty_node_past_consolidate_after_is_deleted() -> None:
    decision = decide([empty("a")], {POOL: WHEN_EMPTY_30S}, now=NOW)
    assert [c.nodeclaim for c in decision.delete] == ["a"]
    assert decision.skipped == ()


W30 = {POOL: WHEN_EMPTY_30S}
NEVER = {POOL: PoolDisruption(consolidate_after=None)}
INVALID = {POOL: PoolDisruption(consolidate_after=None, error="consolidateAfter: bad")}
BUDGET_ZERO = {POOL: PoolDisruption(consolidate_after=0.0, budgets=(BudgetSpec(nodes="0"),))}


@pytest.mark.parametrize(
    ("candidate", "pools", "reason"),
    [
        pytest.param(empty("a", nodepool=None), W30, SkipReason.UNMANAGED, id="unmanaged"),
        pytest.param(empty("a"), {}, SkipReason.NODEPOOL_NOT_FOUND, id="no-pool"),
        pytest.param(empty("a", initialized_at=None), W30, SkipReason.NOT_INITIALIZED, id="new"),
        pytest.param(empty("a", deleting=True), W30, SkipReason.DELETING, id="deleting"),
        pytest.param(empty("a", do_not_disrupt=True), W30, SkipReason.DO_NOT_DISRUPT, id="dnd"),
        pytest.param(empty("a", nominated=True), W30, SkipReason.NOMINATED, id="nominated"),
        pytest.param(empty("a", reschedulable_pods=1), W30, SkipReason.NOT_EMPTY, id="has-pod"),
        pytest.param(empty("a", idle=29.0), W30, SkipReason.NOT_CONSOLIDATABLE, id="too-soon"),
        pytest.param(empty("a"), NEVER, SkipReason.CONSOLIDATION_DISABLED, id="never"),
        pytest.param(empty("a"), INVALID, SkipReason.INVALID_CONSOLIDATE_AFTER, id="invalid"),
        pytest.param(empty("a"), BUDGET_ZERO, SkipReason.BUDGET, id="budget-zero"),
    ],
)
def test_candidate_rules(
    candidate: Candidate, pools: dict[str, PoolDisruption], reason: SkipReason
) -> None:
    decision = decide([candidate], pools, now=NOW)
    assert decision.delete == ()
    assert [(s.nodeclaim, s.reason) for s in decision.skipped] == [("a", reason)]


def test_consolidate_after_counts_from_the_later_of_initialization_and_last_pod_event() -> None:
    recently_initialized = empty("a", initialized_at=NOW - 10, last_pod_event_time=None)
    decision = decide([recently_initialized], {POOL: WHEN_EMPTY_30S}, now=NOW)
    assert [s.reason for s in decision.skipped] == [SkipReason.NOT_CONSOLIDATABLE]
    assert decide([recently_initialized], {POOL: WHEN_EMPTY_30S}, now=NOW + 20).delete


def test_deleting_nodeclaims_use_up_the_budget_and_oldest_empty_goes_first() -> None:
    pools = {POOL: PoolDisruption(consolidate_after=30.0, budgets=(BudgetSpec(nodes="2"),))}
    candidates = [empty("young", idle=40), empty("old", idle=400), empty("gone", deleting=True)]
    decision = decide(candidates, pools, now=NOW)
    assert [c.nodeclaim for c in decision.delete] == ["old"]
    budget_skips = [s.nodeclaim for s in decision.skipped if s.reason is SkipReason.BUDGET]
    assert budget_skips == ["young"]
    assert decision.allowances[POOL].allowed == 1


candidates_strategy = st.lists(
    st.builds(
        Candidate,
        nodeclaim=st.uuids().map(str),
        node=st.sampled_from(["n", None]),
        nodepool=st.sampled_from([POOL, "other", None]),
        initialized_at=st.one_of(st.none(), st.floats(NOW - 500, NOW)),
        last_pod_event_time=st.one_of(st.none(), st.floats(NOW - 500, NOW)),
        deleting=st.booleans(),
        do_not_disrupt=st.booleans(),
        reschedulable_pods=st.integers(0, 3),
        nominated=st.booleans(),
    ),
    max_size=12,
    unique_by=lambda c: c.nodeclaim,
)
pools_strategy = st.builds(
    PoolDisruption,
    consolidate_after=st.one_of(st.none(), st.sampled_from([0.0, 30.0, 300.0])),
    budgets=st.lists(
        st.builds(BudgetSpec, nodes=st.sampled_from(["0", "1", "2", "10%", "50%", "100%"])),
        max_size=3,
    ).map(tuple),
)


@given(candidates_strategy, pools_strategy, pools_strategy)
def test_properties_never_exceed_budget_never_delete_a_busy_or_fresh_node(
    candidates: list[Candidate], pool: PoolDisruption, other: PoolDisruption
) -> None:
    pools = {POOL: pool, "other": other}
    decision = decide(candidates, pools, now=NOW)
    chosen = {c.nodeclaim for c in decision.delete}
    skipped = {s.nodeclaim for s in decision.skipped}
    assert chosen.isdisjoint(skipped)
    assert chosen | skipped == {c.nodeclaim for c in candidates}
    for candidate in decision.delete:
        assert candidate.reschedulable_pods == 0
        assert not candidate.deleting
        assert not candidate.do_not_disrupt
        assert not candidate.nominated
        assert candidate.nodepool is not None
        assert candidate.node is not None
        after = pools[candidate.nodepool].consolidate_after
        assert after is not None
        since = max(t for t in (candidate.initialized_at, candidate.last_pod_event_time) if t)
        assert NOW - since >= after
    for name, settings in pools.items():
        members = [c for c in candidates if c.nodepool == name]
        limits = [len(members)] + [_limit(b.nodes, len(members)) for b in settings.budgets]
        already = sum(c.deleting for c in members)
        started = sum(c.nodepool == name for c in decision.delete)
        assert started <= max(0, min(limits) - already)


def _limit(nodes: str, total: int) -> int:
    """Independent restatement of a budget's limit: integer, or percentage rounded up."""
    if nodes.endswith("%"):
        return -(-int(nodes[:-1]) * total // 100)
    return int(nodes)
