"""Pod classes and the order they are scheduled in.

Pure: identical pending pods (same owner and the same scheduling shape — everything but uid, name
and creation order) form one class, placed together, which is what keeps throughput flat at tens of
thousands of pods. Classes are ordered as Karpenter orders pods: CPU request descending, then
memory descending, then creation order, then UID, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from karpy.core.pods import Pod
from karpy.core.resources import CPU, MEMORY, Resources
from karpy.core.scheduling.pool import Vector
from karpy.core.scheduling.preferences import Relaxation, Shape
from karpy.core.scheduling.results import Reject
from karpy.core.scheduling.topology import ShapeTopology

if TYPE_CHECKING:
    from karpy.core.scheduling.existingnode import ExistingNode
    from karpy.core.scheduling.nodeclaim import NodeClaim


@attrs.define
class PodClass:
    """Identical pods, in creation order; ``pods`` shrinks as they are placed."""

    representative: Pod
    pods: list[Pod]
    requests: Resources
    state: Relaxation
    relaxations: list[str] = attrs.field(factory=list)
    context: ShapeContext | None = None
    context_state: Relaxation | None = None


@attrs.define(eq=False)
class ShapeContext:
    """Everything the solver caches for one shape: vector, topology, per-pool verdicts, and the
    bins that may still take it (``alive``; ``scanned`` counts bins already considered).

    ``host_blockers`` are per-hostname counts with the level at which a bin is closed to this
    shape for good (hostname anti-affinity, other pods' anti-affinity, hostname spread): a cheap
    pre-filter before the full check."""

    shape: Shape
    vector: Vector
    topology: ShapeTopology
    pool_verdicts: dict[str, Reject | None] = attrs.field(factory=dict)
    alive: list[ExistingNode | NodeClaim] = attrs.field(factory=list)
    scanned: int = 0
    host_blockers: tuple[tuple[dict[str, int], int], ...] = ()

    @property
    def simple(self) -> bool:
        """No topology and no host ports: the pod can move without touching any count."""
        return self.topology.empty and not self.shape.host_ports

    @property
    def movable(self) -> bool:
        """No host ports and no hostname topology: the pod can move to another bin in the same
        domains (zone, capacity type, ...) without changing any count."""
        return not self.topology.touches_hostname and not self.shape.host_ports


_IDENTITY = frozenset({"uid", "name", "creation"})
_SHAPE_FIELDS = tuple(f.name for f in attrs.fields(Pod) if f.name not in _IDENTITY)


def class_key(pod: Pod) -> tuple[object, ...]:
    """Every field of the pod but its identity: equal keys mean interchangeable pods."""
    return tuple(getattr(pod, name) for name in _SHAPE_FIELDS)


def classify(pods: Iterable[Pod]) -> list[tuple[Pod, list[Pod]]]:
    """Group pods into classes, each class's pods in (creation, uid) order, classes in queue
    order."""
    groups: dict[tuple[object, ...], list[Pod]] = {}
    for pod in pods:
        groups.setdefault(class_key(pod), []).append(pod)
    out: list[tuple[Pod, list[Pod], Resources]] = []
    for members in groups.values():
        members.sort(key=lambda p: (p.creation, p.uid))
        out.append((members[0], members, members[0].requests()))
    out.sort(
        key=lambda item: (
            -item[2].get_amount(CPU),
            -item[2].get_amount(MEMORY),
            item[0].creation,
            item[0].uid,
        )
    )
    return [(rep, members) for rep, members, _ in out]
