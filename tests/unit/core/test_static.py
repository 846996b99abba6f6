"""The static NodePool planner (karpy.core.static): how many NodeClaims to launch and which to
remove so a pool holds exactly `spec.replicas`, within `limits.nodes` and its budgets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.static import StaticClaim, plan
from tests.unit.core import builders as b


def test_a_new_pool_launches_its_replicas() -> None:
    assert plan(3, []).launch == 3
    assert plan(3, []).remove == ()


def test_a_pool_at_its_replicas_does_nothing() -> None:
    decided = plan(2, [StaticClaim(name="a"), StaticClaim(name="b")])
    assert (decided.launch, decided.remove, decided.waiting) == (0, (), "")


def test_a_deleting_nodeclaim_is_replaced_before_it_is_gone() -> None:
    """Expiry, interruption or a hand deletion: the replacement launches while the old drains."""
    claims = [StaticClaim(name="a"), StaticClaim(name="b", deleting=True)]
    assert plan(2, claims).launch == 1


def test_the_node_limit_counts_deleting_nodeclaims_and_says_why_it_holds() -> None:
    claims = [StaticClaim(name="a"), StaticClaim(name="b", deleting=True)]
    decided = plan(2, claims, node_limit=2)
    assert decided.launch == 0
    assert "limits.nodes is 2" in decided.waiting
    assert plan(5, [], node_limit=3).launch == 3


def test_a_disruption_candidate_counts_while_its_replacement_launches() -> None:
    """StaticDrift's candidate and its replacement: nothing launched, nothing removed."""
    claims = [
        StaticClaim(name="old", disrupting=True),
        StaticClaim(name="new", launched=False),
        StaticClaim(name="other"),
    ]
    decided = plan(2, claims)
    assert (decided.launch, decided.remove) == (0, ())


def test_scale_down_removes_unlaunched_then_empty_then_cheapest_protected_last() -> None:
    claims = [
        StaticClaim(name="guarded", empty=False, protected=True, cost=0.5),
        StaticClaim(name="busy", empty=False, cost=3.0),
        StaticClaim(name="light", empty=False, cost=1.0),
        StaticClaim(name="idle"),
        StaticClaim(name="pending", launched=False),
    ]
    assert plan(0, claims).remove == ("pending", "idle", "light", "busy", "guarded")
    assert plan(3, claims).remove == ("pending", "idle")


def test_a_higher_deprovisioning_priority_goes_first_among_busy_and_unlaunched() -> None:
    claims = [
        StaticClaim(name="cheap", empty=False, cost=1.0),
        StaticClaim(name="marked", empty=False, cost=9.0, priority=5),
        StaticClaim(name="idle", priority=-3),
        StaticClaim(name="p-low", launched=False),
        StaticClaim(name="p-high", launched=False, priority=2),
    ]
    assert plan(0, claims).remove == ("p-high", "p-low", "idle", "marked", "cheap")


def test_scale_down_stays_within_the_budget_and_says_why() -> None:
    claims = [StaticClaim(name=n) for n in "abcd"]
    decided = plan(1, claims, removable=1)
    assert decided.remove == ("a",)
    assert "disruption budgets allow 1" in decided.waiting
    assert plan(1, claims, removable=0).remove == ()


def test_negative_replicas_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"spec\.replicas"):
        plan(-1, [])


claim_strategy = st.builds(
    StaticClaim,
    name=st.uuids().map(str),
    deleting=st.booleans(),
    disrupting=st.booleans(),
    launched=st.booleans(),
    empty=st.booleans(),
    protected=st.booleans(),
    cost=st.floats(min_value=-10, max_value=1000, allow_nan=False),
    priority=st.integers(min_value=-5, max_value=5),
)


@given(
    replicas=st.integers(min_value=0, max_value=20),
    claims=st.lists(claim_strategy, max_size=25, unique_by=lambda c: c.name),
    node_limit=st.none() | st.integers(min_value=0, max_value=30),
    removable=st.none() | st.integers(min_value=-3, max_value=30),
)
def test_the_plan_never_exceeds_replicas_limits_or_budgets(
    replicas: int,
    claims: list[StaticClaim],
    node_limit: int | None,
    removable: int | None,
) -> None:
    decided = plan(replicas, claims, node_limit=node_limit, removable=removable)
    live = [c for c in claims if not c.deleting]
    standing = {c.name for c in live if not c.disrupting}
    assert decided.launch >= 0
    assert not (decided.launch and decided.remove)
    # Launching never takes the pool past replicas, nor past limits.nodes.
    assert len(live) + decided.launch <= max(replicas, len(live))
    if node_limit is not None:
        assert len(claims) + decided.launch <= max(node_limit, len(claims))
    # Removing takes only standing NodeClaims, once each, within the budget, never below
    # replicas.
    assert set(decided.remove) <= standing
    assert len(set(decided.remove)) == len(decided.remove)
    if removable is not None:
        assert len(decided.remove) <= max(0, removable)
    assert len(standing) - len(decided.remove) >= min(replicas, len(standing))
    # Short of replicas with room and budget, the plan closes the whole gap.
    if decided.waiting == "":
        if len(live) < replicas:
            assert len(live) + decided.launch == replicas
        else:
            assert len(standing) - len(decided.remove) <= replicas


def test_scheduling_fills_a_static_pools_nodes_but_never_plans_one_on_it() -> None:
    """Pods may go on a static pool's nodes; a NodeClaim for more comes from a dynamic pool
    (or none, with only the static pool), never from the static one."""
    static = b.nodepool("warm", static=True)
    node = b.node("warm-1", cpu="2", labels={wk.LABEL_NODEPOOL: "warm"}, nodepool_name="warm")
    only_static = b.run(b.snapshot([static], nodes=[node]), b.pods(3, cpu="1500m"))
    assert {n.node for n in only_static.nominations} == {"warm-1"}
    assert len(only_static.nominations) == 1
    assert not only_static.nodeclaims
    assert len(only_static.unplaced) == 2
    both = b.run(b.snapshot([static, b.nodepool("dynamic")], nodes=[node]), b.pods(3, cpu="1500m"))
    assert {c.nodepool for c in both.nodeclaims} == {"dynamic"}
    assert not both.unplaced
