"""The disruption pass at rest: skip the whole pass while nothing it reads has changed.

A pass reads every NodeClaim, Node and pod, translates them into facts and fingerprints them, so
a pass over a settled fleet costs time in proportion to the fleet every polling period: 0.009
cores on 22 nodes, 0.06 on 120, more than the 0.05-core idle target well before 5,000 nodes.
Karpenter marks a cluster "consolidated" when a pass found nothing, and skips consolidation until
its cluster state changes or five minutes pass. karpy goes one step further: a pass that found
nothing to do at all (no command from any method, consolidation complete and settled) puts the
controller at rest, remembering the cluster state generation it read (karpy.state.generation:
every watch event that changes what a pass reads, and every change of the provisioner's
nominations). Until the generation moves or the rest runs out, the next pass returns at once.

The rest runs out at the first moment the same state could be decided differently by the clock
alone: the consolidated mark's five minutes (prices may move), a scheduled budget turning or a
pod's do-not-disrupt duration ending (karpy.core.disruption.due), a fresh node's nomination
window closing, or a provisioner's nomination lapsing. Everything else that depends on time is
turned into state by another controller (the `Consolidatable` and `Drifted` conditions,
expiration deleting its NodeClaim), and so wakes the pass through the generation.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from karpy.core.disruption.candidates import NodeFacts


@attrs.frozen(kw_only=True)
class Rest:
    """The controller at rest since a pass at `generation` found nothing, until `until`
    (UTC epoch seconds)."""

    generation: tuple[int, int]
    until: float

    def holds(self, generation: tuple[int, int], now: float) -> bool:
        """Whether a pass now, at `generation`, would decide as the one that found nothing."""
        return generation == self.generation and now < self.until


def nomination_windows_end(
    nodes: Iterable[NodeFacts], *, now: float, window: float
) -> float | None:
    """When the first freshly initialized node's nomination window (the facts' `nominated`
    for a node no pod event has reached since it initialized) ends after `now`, if any."""
    ends = [
        node.initialized_at + window
        for node in nodes
        if node.initialized_at is not None
        and node.initialized_at + window > now
        and (node.last_pod_event_time is None or node.last_pod_event_time < node.initialized_at)
    ]
    return min(ends, default=None)
