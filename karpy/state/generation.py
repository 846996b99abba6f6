"""Which watch events change cluster state in a way a decision can see: the state generation.

A loop that decides over the whole cluster (the disruption pass) need not decide again while
nothing it reads has changed: the same read gives the same answer (Karpenter marks such a cluster
"consolidated" and skips consolidation until its cluster state changes). ClusterState counts a
generation, bumped by its stores whenever an object is added or deleted, or modified in a way
that matters; a loop remembers the generation its last read saw and compares.

What does not matter is what a node agent writes only to say it is alive: a kubelet (or kwok
without leases) re-posts its Node's status every few minutes with nothing new but each
condition's `lastHeartbeatTime` (and a new resourceVersion). At a few thousand Nodes those posts
arrive every second or so, and counting them would leave no loop ever at rest. Every other
change counts, whatever the kind: missing one would leave a decision stale, counting one too many
only costs a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from karpy.apis.kube.node import Node
from karpy.kube.kinds import NODES


def _conditions(node: Node) -> tuple[tuple[object, ...], ...]:
    return tuple(
        (c.type, c.status, c.reason, c.message, c.last_transition_time)
        for c in node.status.conditions
    )


def node_changed(old: Node, new: Node) -> bool:
    """Whether a Node update says more than that its agent is alive. Runs on every Node event
    (thousands a minute on a large fleet), so it compares the cheap parts first."""
    before, after = old.status, new.status
    return (
        old.spec != new.spec
        or _conditions(old) != _conditions(new)
        or before.allocatable != after.allocatable
        or before.capacity != after.capacity
        or before.addresses != after.addresses
        or before.node_info != after.node_info
        or before.phase != after.phase
        or attrs.evolve(old.metadata, resource_version=None)
        != attrs.evolve(new.metadata, resource_version=None)
    )


SIGNIFICANT: Final[Mapping[str, Callable[[Any, Any], bool]]] = {NODES.kind: node_changed}
"""Per kind, whether an update (old, new) changes state; a kind not here: every update does."""
