"""The disruption pass at rest: it holds while the generation is the one it read and the clock
has not reached its end; a fresh node's nomination window ends it."""

from __future__ import annotations

from karpy.controllers.disruption.rest import Rest, nomination_windows_end
from karpy.core.disruption.candidates import NodeFacts

NOW = 1_800_000_000.0


def test_a_rest_holds_only_at_its_generation_and_before_its_end() -> None:
    rest = Rest(generation=(4, 2), until=NOW + 60)
    assert rest.holds((4, 2), NOW)
    assert rest.holds((4, 2), NOW + 59.9)
    assert not rest.holds((4, 2), NOW + 60)  # time is up: pass again
    assert not rest.holds((5, 2), NOW)  # cluster state changed
    assert not rest.holds((4, 3), NOW)  # the nominations changed


def test_a_fresh_node_ends_the_rest_when_its_nomination_window_closes() -> None:
    def facts(name: str, initialized: float | None, last: float | None = None) -> NodeFacts:
        return NodeFacts(
            nodeclaim=name,
            node=name,
            nodepool="p",
            created_at=NOW - 300,
            initialized_at=initialized,
            last_pod_event_time=last,
        )

    nodes = [
        facts("old", NOW - 100),  # window long closed
        facts("fresh", NOW - 5),  # closes at NOW + 15
        facts("fresher", NOW - 1),  # closes at NOW + 19
        facts("busy", NOW - 2, last=NOW - 1),  # a pod event since: not nominated by the window
        facts("launching", None),
    ]
    assert nomination_windows_end(nodes, now=NOW, window=20.0) == NOW + 15
    assert nomination_windows_end(nodes[:1], now=NOW, window=20.0) is None
