"""NodeNominations: the provisioner's record of which nodes pending pods are expected on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.state.nominations import NodeNominations


def test_a_nomination_lives_for_its_window_and_is_forgotten_after_the_next_pass() -> None:
    record = NodeNominations()
    record.nominate("n1", [("ns", "p1")], now=10.0, window=20.0)
    record.passed()
    held = record.get("n1", now=29.9)
    assert held is not None
    assert not held.held
    assert held.pods == frozenset({("ns", "p1")})
    record.passed()  # a later pass did not renew it
    assert record.get("n1", now=30.0) is None
    assert len(record) == 0


def test_a_nomination_is_held_past_its_window_until_a_later_pass_looks_again() -> None:
    """The provisioner cannot pass while cluster state is unsynced (an apiserver outage): the
    nomination it made last must not lapse under disruption meanwhile."""
    record = NodeNominations()
    assert record.passes == 0
    record.nominate("n1", [("ns", "p1")], now=0.0, window=20.0)
    record.passed()
    assert record.passes == 1
    stalled = record.get("n1", now=500.0)
    assert stalled is not None
    assert stalled.held
    record.nominate("n1", [("ns", "p1")], now=501.0, window=20.0)  # the next pass renews it
    record.passed()
    renewed = record.get("n1", now=502.0)
    assert renewed is not None
    assert not renewed.held
    record.passed()  # and the one after that does not
    assert record.get("n1", now=521.0) is None


def test_renewal_extends_and_joins_pods_but_a_lapsed_one_starts_afresh() -> None:
    record = NodeNominations()
    record.nominate("n1", [("ns", "p1")], now=0.0, window=20.0)
    record.passed()
    record.nominate("n1", [("ns", "p2")], now=15.0, window=20.0)
    record.passed()
    held = record.get("n1", now=34.0)
    assert held is not None
    assert held.pods == frozenset({("ns", "p1"), ("ns", "p2")})
    record.nominate("n1", [("ns", "p3")], now=100.0, window=20.0)
    fresh = record.get("n1", now=101.0)
    assert fresh is not None
    assert fresh.pods == frozenset({("ns", "p3")})


def test_forget_and_a_bad_window() -> None:
    record = NodeNominations()
    record.nominate("n1", [], now=0.0, window=5.0)
    record.forget("n1")
    assert record.get("n1", now=0.0) is None
    with pytest.raises(ValueError, match="window must be > 0"):
        record.nominate("n1", [], now=0.0, window=0.0)


@given(
    st.lists(st.tuples(st.floats(0, 1000), st.floats(0.1, 100)), min_size=1, max_size=20),
    st.floats(0, 1200),
)
def test_a_node_is_nominated_exactly_when_some_pass_still_covers_now(
    passes: list[tuple[float, float]], now: float
) -> None:
    """Passes arrive in time order; the node is held at `now` when the chain of renewals
    (each starting while the previous was live) reaches past it."""
    record = NodeNominations()
    expires = -1.0
    for at, window in sorted(passes):
        record.nominate("n", [("ns", "p")], now=at, window=window)
        record.passed()
        expires = max(expires, at + window) if at < expires else at + window
    record.passed()  # a later pass placed the pod elsewhere: only the window holds the node
    held = record.get("n", now=max(now, sorted(passes)[-1][0]))
    assert (held is not None) == (expires > max(now, sorted(passes)[-1][0]))


def test_the_version_moves_with_every_change_and_next_lapse_names_the_first_window_end() -> None:
    """What the disruption pass at rest compares and when it must look again."""
    record = NodeNominations()
    versions = [record.version]
    assert record.next_lapse(0.0) is None
    record.nominate("n1", [("ns", "p1")], now=0.0, window=20.0)
    versions.append(record.version)
    record.nominate("n2", [("ns", "p2")], now=5.0, window=20.0)
    versions.append(record.version)
    assert record.next_lapse(1.0) == 20.0
    assert record.next_lapse(20.0) == 25.0  # n1's window has ended; n2's is next
    assert record.next_lapse(25.0) is None
    record.passed()
    versions.append(record.version)
    record.forget("n1")
    versions.append(record.version)
    record.forget("n1")  # nothing left to forget: no change
    assert record.version == versions[-1]
    assert versions == sorted(set(versions))
