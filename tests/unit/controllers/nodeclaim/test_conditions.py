"""NodeClaim condition arithmetic (pure): transition times move only on a status change, and
Ready follows Launched, Registered and Initialized."""

from __future__ import annotations

import datetime

from karpy.apis.meta import ConditionStatus, ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimSpec
from karpy.state.conditions import (
    claim_is_true,
    get_condition,
    set_condition,
    with_ready,
)

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=1)
CLAIM = NodeClaim(
    metadata=ObjectMeta(name="c"),
    spec=NodeClaimSpec(
        requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
    ),
)


def test_the_transition_time_moves_only_when_the_status_does() -> None:
    first = set_condition(
        CLAIM, ConditionType.LAUNCHED, ConditionStatus.UNKNOWN, reason="A", now=T0
    )
    reworded = set_condition(
        first, ConditionType.LAUNCHED, ConditionStatus.UNKNOWN, reason="B", message="m", now=T1
    )
    condition = get_condition(reworded, ConditionType.LAUNCHED)
    assert condition is not None
    assert (condition.reason, condition.message, condition.last_transition_time) == ("B", "m", T0)
    flipped = set_condition(
        reworded, ConditionType.LAUNCHED, ConditionStatus.TRUE, reason="Launched", now=T1
    )
    condition = get_condition(flipped, ConditionType.LAUNCHED)
    assert condition is not None
    assert condition.last_transition_time == T1
    assert claim_is_true(flipped, ConditionType.LAUNCHED)


def test_setting_an_identical_condition_returns_the_same_object() -> None:
    once = set_condition(CLAIM, ConditionType.LAUNCHED, ConditionStatus.TRUE, reason="L", now=T0)
    assert (
        set_condition(once, ConditionType.LAUNCHED, ConditionStatus.TRUE, reason="L", now=T1)
        is once
    )


def test_ready_needs_all_three_dependents() -> None:
    claim = CLAIM
    for kind in (ConditionType.LAUNCHED, ConditionType.REGISTERED):
        claim = set_condition(claim, kind, ConditionStatus.TRUE, reason="Ok", now=T0)
    waiting = with_ready(claim, now=T0)
    ready = get_condition(waiting, ConditionType.READY)
    assert ready is not None
    assert ready.status is ConditionStatus.UNKNOWN
    assert ready.message == "Initialized is not True"
    done = with_ready(
        set_condition(claim, ConditionType.INITIALIZED, ConditionStatus.TRUE, reason="Ok", now=T1),
        now=T1,
    )
    assert claim_is_true(done, ConditionType.READY)
