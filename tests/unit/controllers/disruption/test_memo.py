"""The disruption controller's memory of a consolidated cluster (Karpenter's "consolidated"
mark): consolidation is skipped while the cluster is unchanged since a complete pass found
nothing, for at most five minutes; candidates already simulated are not simulated again."""

from __future__ import annotations

from karpy.core.disruption.decision import CONSOLIDATED_TTL, Memo
from karpy.core.disruption.methods import Command, Kind, Pass, Reason

NOW = 1_800_000_000.0


def _nothing(*, examined: frozenset[str], complete: bool) -> Pass:
    return Pass(method=None, commands=(), skipped=(), examined=examined, complete=complete)


def test_a_complete_pass_that_found_nothing_settles_until_the_state_changes() -> None:
    memo = Memo()
    assert not memo.settled(1, NOW)
    memo.record(_nothing(examined=frozenset({"a", "b"}), complete=True), NOW)
    assert memo.settled(1, NOW + 10)
    assert memo.settled(1, NOW + CONSOLIDATED_TTL - 1)
    assert not memo.settled(1, NOW + CONSOLIDATED_TTL)  # re-checked after five minutes
    assert not memo.settled(2, NOW + 20)  # any change: decide afresh
    assert memo.cleared == frozenset()


def test_an_incomplete_pass_clears_its_candidates_without_settling() -> None:
    memo = Memo()
    assert not memo.settled(7, NOW)
    memo.record(_nothing(examined=frozenset({"a"}), complete=False), NOW)
    assert not memo.settled(7, NOW + 10)
    assert memo.cleared == {"a"}
    memo.record(_nothing(examined=frozenset({"b"}), complete=True), NOW + 10)
    assert memo.cleared == {"a", "b"}
    assert memo.settled(7, NOW + 20)


def test_a_command_forgets_everything() -> None:
    memo = Memo()
    memo.settled(3, NOW)
    memo.record(_nothing(examined=frozenset({"a"}), complete=False), NOW)
    command = Command(method=Kind.EMPTINESS, reason=Reason.EMPTY, candidates=())
    memo.record(
        Pass(method=Kind.EMPTINESS, commands=(command,), skipped=(), complete=True), NOW + 10
    )
    assert memo.cleared == frozenset()
    assert not memo.settled(3, NOW + 20)


def test_the_five_minute_recheck_simulates_every_candidate_again() -> None:
    memo = Memo()
    memo.settled(5, NOW)
    memo.record(_nothing(examined=frozenset({"a", "b"}), complete=True), NOW)
    assert memo.settled(5, NOW + 60)
    assert not memo.settled(5, NOW + CONSOLIDATED_TTL)
    assert memo.cleared == frozenset()  # prices may have moved: nothing is taken as cleared
