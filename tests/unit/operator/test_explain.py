"""`karpy explain node`: what the controller last reported, printed beside the recomputed
reason (the cluster side runs in tests/e2e/test_consolidation.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from karpy.apis.kube.event import Event
from karpy.apis.meta import ObjectMeta
from karpy.operator.explain import age, reported_lines

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _event(reason: str, message: str, ago: timedelta) -> Event:
    return Event(reason=reason, message=message, last_timestamp=NOW - ago)


def test_ages_read_like_kubectl() -> None:
    assert [age(s) for s in (-3, 45, 180, 7300, 200000)] == ["0s", "45s", "3m", "2h", "2d"]


def test_the_newest_event_of_each_reason_is_printed_with_its_age() -> None:
    events = [
        _event("Unconsolidatable", "old reason", timedelta(minutes=30)),
        _event("Unconsolidatable", "pod held", timedelta(minutes=2)),
        _event("DisruptionBlocked", "Cannot disrupt Node: pod held", timedelta(seconds=50)),
    ]
    assert reported_lines(events, "pod held", now=NOW) == [
        "  last reported by the controller (2m ago): Unconsolidatable: pod held",
        "  last reported by the controller (50s ago): DisruptionBlocked: Cannot disrupt Node:"
        " pod held",
    ]


def test_a_different_reason_from_the_controller_is_pointed_out() -> None:
    events = [_event("Unconsolidatable", "node is nominated", timedelta(seconds=5))]
    lines = reported_lines(events, "can't replace with a cheaper node", now=NOW)
    assert lines[0].endswith("Unconsolidatable: node is nominated")
    assert "differs from this recomputation" in lines[1]
    assert "differs" in reported_lines(events, None, now=NOW)[1]


def test_no_event_says_so() -> None:
    assert reported_lines([], "x", now=NOW) == [
        "  no Unconsolidatable or DisruptionBlocked event from the controller"
    ]


def test_events_of_the_same_second_are_ordered_as_the_apiserver_stored_them() -> None:
    first = _event("Unconsolidatable", "earlier", timedelta(seconds=3))
    second = _event("Unconsolidatable", "later", timedelta(seconds=3))
    events = [
        attrs.evolve(second, metadata=ObjectMeta(resource_version="120")),
        attrs.evolve(first, metadata=ObjectMeta(resource_version="99")),
    ]
    assert reported_lines(events, "later", now=NOW) == [
        "  last reported by the controller (3s ago): Unconsolidatable: later"
    ]
