"""The condition set (pure): one condition set or cleared at a time, transition times that move
only with the status, observedGeneration, and Ready derived from the dependents."""

from __future__ import annotations

import datetime

from karpy.apis.conditions import ConditionSet, Summary, find, with_condition
from karpy.apis.meta import Condition, ConditionStatus

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=1, microseconds=250)
SET = ConditionSet(dependents=("Launched", "Registered"))
TRUE, FALSE, UNKNOWN = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def _get(conditions: tuple[Condition, ...], kind: str) -> Condition:
    condition = find(conditions, kind)
    assert condition is not None, kind
    return condition


def test_ready_is_true_only_when_every_dependent_is() -> None:
    one = SET.set((), "Launched", TRUE, reason="Launched", now=T0)
    assert (_get(one, "Ready").status, _get(one, "Ready").reason) == (
        UNKNOWN,
        "UnhealthyDependents",
    )
    assert _get(one, "Ready").message == "Registered is not True"
    both = SET.set(one, "Registered", TRUE, reason="Registered", now=T1)
    ready = _get(both, "Ready")
    assert (ready.status, ready.reason, ready.message) == (TRUE, "Ready", "")
    assert ready.last_transition_time == T1.replace(microsecond=0)
    assert SET.is_ready(both)


def test_a_false_dependent_makes_ready_false_and_an_unknown_one_unknown() -> None:
    conditions = SET.set((), "Launched", UNKNOWN, reason="Pending", now=T0)
    assert _get(conditions, "Ready").status is UNKNOWN
    conditions = SET.set(conditions, "Registered", FALSE, reason="Broken", message="m", now=T0)
    ready = _get(conditions, "Ready")
    assert ready.status is FALSE
    assert ready.message == "Launched is not True, Registered is not True"


def test_the_detailed_summary_names_each_reason_and_message() -> None:
    detailed = ConditionSet(dependents=("SubnetsReady", "AMIsReady"), summary=Summary.DETAILED)
    conditions = detailed.set((), "AMIsReady", TRUE, reason="Ready", now=T0)
    conditions = detailed.set(
        conditions, "SubnetsReady", FALSE, reason="SubnetsNotFound", message="no match", now=T0
    )
    assert _get(conditions, "Ready").message == "SubnetsReady=False (SubnetsNotFound: no match)"


def test_clearing_a_dependent_derives_ready_again_and_clearing_a_missing_one_changes_nothing() -> (
    None
):
    both = SET.set(
        SET.set((), "Launched", TRUE, reason="L", now=T0), "Registered", TRUE, reason="R", now=T0
    )
    assert SET.is_ready(both)
    cleared = SET.clear(both, "Registered", now=T1)
    assert find(cleared, "Registered") is None
    assert _get(cleared, "Ready").status is UNKNOWN
    assert SET.clear(cleared, "Registered", now=T1) is cleared
    assert SET.clear(both, "Drifted", now=T1) is both


def test_the_transition_time_moves_only_when_the_status_does() -> None:
    first = with_condition((), "Drifted", TRUE, reason="A", now=T0)
    reworded = with_condition(first, "Drifted", TRUE, reason="B", message="m", now=T1)
    assert _get(reworded, "Drifted").last_transition_time == T0
    assert (_get(reworded, "Drifted").reason, _get(reworded, "Drifted").message) == ("B", "m")
    flipped = with_condition(reworded, "Drifted", FALSE, reason="B", now=T1)
    assert _get(flipped, "Drifted").last_transition_time == T1.replace(microsecond=0)


def test_an_unchanged_condition_is_the_same_tuple_unless_its_generation_moved() -> None:
    once = SET.set((), "Launched", TRUE, reason="L", now=T0, generation=1)
    assert SET.set(once, "Launched", TRUE, reason="L", now=T1, generation=1) is once
    assert SET.with_root(once, now=T1, generation=1) is once
    assert SET.set(once, "Launched", TRUE, reason="L", now=T1) is once
    moved = SET.set(once, "Launched", TRUE, reason="L", now=T1, generation=2)
    assert moved is not once
    assert _get(moved, "Launched").observed_generation == 2
    assert _get(moved, "Launched").last_transition_time == T0
    assert _get(moved, "Ready").observed_generation == 2


def test_a_changed_condition_moves_to_the_end_and_others_are_kept() -> None:
    other = with_condition((), "Drifted", TRUE, reason="D", now=T0)
    conditions = SET.set(other, "Launched", TRUE, reason="L", now=T0)
    assert [c.type for c in conditions] == ["Drifted", "Launched", "Ready"]
    relaunched = SET.set(conditions, "Launched", UNKNOWN, reason="L", now=T1)
    assert [c.type for c in relaunched] == ["Drifted", "Launched", "Ready"]
    redrifted = with_condition(relaunched, "Drifted", FALSE, reason="D", now=T1)
    assert [c.type for c in redrifted] == ["Launched", "Ready", "Drifted"]
