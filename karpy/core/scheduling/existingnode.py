"""An existing node (or in-flight NodeClaim from the cluster) as a place pods may go.

Pure and mutable only within one solve: ``try_add`` answers whether a pod fits without changing
anything (returning a ``Placement`` or a ``Reject`` saying why), ``commit`` applies a placement.
Existing nodes have fixed labels, so topology domains are known and nothing narrows.
"""

from __future__ import annotations

import functools
import operator

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.pods import HostPort, Pod
from karpy.core.requirements import Requirements
from karpy.core.scheduling.pool import ResourceSpace, Vector
from karpy.core.scheduling.queue import ShapeContext
from karpy.core.scheduling.results import ReasonKind, Reject
from karpy.core.scheduling.topology import Topology, TopologyReject
from karpy.core.snapshot import Node
from karpy.core.taints import Taint, schedulable_taints, untolerated


@functools.cache
def _insufficient(name: str) -> Reject:
    return Reject(ReasonKind.RESOURCES, f"insufficient {name}")


SavedState = tuple[Requirements, int, Vector, int, int, bool]
"""A bin's (requirements, instance-type mask, used resources, pod count, port count,
minValues relaxed)."""


@attrs.define
class Placement:
    """A checked placement: the bin's state after adding one pod."""

    requirements: Requirements
    mask: int
    used: Vector
    domains: dict[str, str]
    min_values_relaxed: bool = False


class ExistingNode:
    """A node already in the cluster, with what is left of its allocatable."""

    kind = "node"

    def __init__(
        self,
        node: Node,
        *,
        space: ResourceSpace,
        topology: Topology,
        startup_taints: tuple[Taint, ...] = (),
    ) -> None:
        self.node = node
        self.name: str = node.name
        self.labels = node.labels_dict
        self.hostname = self.labels[wk.LABEL_HOSTNAME]
        taints = schedulable_taints(node.taints, initialized=node.initialized)
        if not node.initialized:
            taints = tuple(t for t in taints if t not in startup_taints)
        self.taints = taints
        self.topology = topology
        self.names = space.names
        self.allocatable: Vector
        self.used: Vector
        self.allocatable, self.used = node.amounts(space.names)
        self.ports: list[HostPort] = list(node.host_ports)
        self.pods: list[Pod] = []
        self.requirements = node.label_requirements

    def too_full(self, vector: Vector) -> bool:
        """Would a pod of `vector` exceed the room left here (try_add's last check, alone)?"""
        return any(map(operator.gt, map(operator.add, self.used, vector), self.allocatable))

    def try_add(self, ctx: ShapeContext) -> Placement | Reject:
        """Would one pod of ``ctx`` fit here now?"""
        shape = ctx.shape
        if self.taints:
            taint = untolerated(self.taints, shape.tolerations)
            if taint is not None:
                return Reject(ReasonKind.TAINT, f"untolerated taint {taint.describe()}")
        for port in shape.host_ports:
            if any(port.conflicts(p) for p in self.ports):
                return Reject(ReasonKind.HOST_PORT, f"host port {port.port}/{port.protocol} in use")
        if shape.requirements:
            bad = shape.requirements.matches_labels(self.labels)
            if bad is not None:
                return Reject(ReasonKind.REQUIREMENT, bad.message())
        if shape.volume_requirements and not any(
            alt.matches_labels(self.labels) is None for alt in shape.volume_requirements
        ):
            return Reject(ReasonKind.VOLUME, "no volume topology term matches the node")
        domains: dict[str, str] = {}
        if not ctx.topology.empty:
            verdict = self.topology.admit(
                ctx.topology, hostname=self.hostname, fixed=self.labels, requirements=Requirements()
            )
            if isinstance(verdict, TopologyReject):
                return Reject(
                    ReasonKind.TOPOLOGY,
                    f"{verdict.kind} on {verdict.key}: {verdict.detail}",
                    verdict.permanent,
                )
            domains = {k: v[0] for k, v in verdict.items() if v}
        # The hot path of every solve over many nodes: element-wise in C, and one shared Reject
        # per resource (a pod scans every existing node before a new NodeClaim is opened).
        need = tuple(map(operator.add, self.used, ctx.vector))
        if any(map(operator.gt, need, self.allocatable)):
            name = next(
                n
                for a, limit, n in zip(need, self.allocatable, self.names, strict=True)
                if a > limit
            )
            return _insufficient(name)
        return Placement(self.requirements, 0, need, domains)

    def commit(self, placement: Placement, pod: Pod, ctx: ShapeContext) -> None:
        """Add ``pod`` as checked by ``try_add``."""
        self.used = placement.used
        self.pods.append(pod)
        self.ports.extend(ctx.shape.host_ports)
        if not ctx.topology.empty:
            self.topology.record(ctx.topology, hostname=self.hostname, domains=placement.domains)

    def save(self) -> SavedState:
        """State for ``restore`` (used by the improvement step)."""
        return (self.requirements, 0, self.used, len(self.pods), len(self.ports), False)

    def restore(self, saved: SavedState) -> None:
        """Undo commits made since ``save`` (simple shapes only: no topology to undo)."""
        _, _, self.used, npods, nports, _ = saved
        del self.pods[npods:]
        del self.ports[nports:]
