"""Pod classes and the order they are scheduled in.

Pure: identical pending pods (same owner and the same scheduling shape — everything but uid, name
and creation order) form one class, placed together, which is what keeps throughput flat at tens of
thousands of pods. Classes are ordered as Karpenter orders pods: CPU request descending, then
memory descending, then creation order, then UID, so the result is deterministic. The first
pass then takes pods from the classes in one of two orders: interleaved in proportion to class
size (``interleaved_order``), or balancing memory against CPU (``balanced_order``).
"""

from __future__ import annotations

import operator
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


_SHAPE_KEY = operator.attrgetter(*_SHAPE_FIELDS)


def class_key(pod: Pod) -> tuple[object, ...]:
    """Every field of the pod but its identity: equal keys mean interchangeable pods."""
    key: tuple[object, ...] = _SHAPE_KEY(pod)
    return key


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


def interleaved_order(classes: list[PodClass]) -> list[int]:
    """Classes interleaved in proportion to their size, queue order within each round."""
    keyed: list[tuple[float, int]] = []
    for ci, cls in enumerate(classes):
        n = len(cls.pods)
        keyed.extend(((k + 0.5) / n, ci) for k in range(n))
    keyed.sort()
    return [ci for _, ci in keyed]


def balanced_order(classes: list[PodClass]) -> list[int]:
    """The first pass's order of pods, as class indices: large pods first, and CPU-heavy and
    memory-heavy pods interleaved so that every prefix of the order asks for memory and CPU in
    about the ratio of the whole batch.

    Pods whose memory:CPU ratio is at most the batch's go on one pile and the rest on the other,
    each pile largest first (size: the larger of CPU and memory over the batch ratio); the order
    takes from the memory pile while what it has taken so far leans to CPU, and from the CPU pile
    otherwise. A NodeClaim filled from this stream ends with its requests in the batch's shape,
    the shape the LP's cheapest types are chosen for, instead of holding only CPU-heavy pods
    (a compute-optimised type with idle memory) or only memory-heavy ones. Classes interleave
    pod by pod, so identical pods spread over NodeClaims too. Pure and deterministic.
    """
    cpu_total = mem_total = 0
    shapes: list[tuple[int, int, int]] = []
    for ci, cls in enumerate(classes):
        if not cls.pods:
            continue  # all placed already (by a seeded pass)
        cpu, mem = cls.requests.get_amount(CPU), cls.requests.get_amount(MEMORY)
        cpu_total += cpu * len(cls.pods)
        mem_total += mem * len(cls.pods)
        shapes.append((cpu, mem, ci))
    if cpu_total == 0 or mem_total == 0:
        return [ci for ci, cls in enumerate(classes) for _ in cls.pods]
    tau = mem_total / cpu_total

    def size(shape: tuple[int, int, int]) -> tuple[float, int]:
        return (-max(shape[0] * tau, shape[1]), shape[2])

    cpu_pile = sorted((s for s in shapes if s[1] <= s[0] * tau), key=size)
    mem_pile = sorted((s for s in shapes if s[1] > s[0] * tau), key=size)
    left = [len(c.pods) for c in classes]
    order: list[int] = []
    lean = 0.0  # memory taken minus tau times CPU taken
    i = j = 0
    while i < len(cpu_pile) or j < len(mem_pile):
        if i >= len(cpu_pile) or j >= len(mem_pile):
            take_mem = i >= len(cpu_pile)
        elif lean == 0:  # at the start (or exactly balanced) the larger pod goes first
            take_mem = size(mem_pile[j]) < size(cpu_pile[i])
        else:
            take_mem = lean < 0
        cpu, mem, ci = mem_pile[j] if take_mem else cpu_pile[i]
        order.append(ci)
        lean += mem - tau * cpu
        left[ci] -= 1
        if not left[ci]:
            if take_mem:
                j += 1
            else:
                i += 1
    return order
