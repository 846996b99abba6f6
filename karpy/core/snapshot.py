"""ClusterSnapshot: everything the scheduler reads, frozen at one instant.

Pure values, built *before* solving by whoever owns I/O (cluster state, a scenario file, a test),
so the solver never lists or gets anything while it runs and the same snapshot always yields the
same plan.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NewType

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import HostPort, LabelPairs, Pod, freeze_labels
from karpy.core.requirements import ANY, Requirement, Requirements
from karpy.core.resources import EMPTY, Resources
from karpy.core.taints import Effect, Taint

NodePoolName = NewType("NodePoolName", str)
NodeName = NewType("NodeName", str)

NODES_LIMIT = "nodes"


@attrs.frozen
class NodePool:
    """The parts of a NodePool that scheduling reads.

    ``limits`` may name ``nodes`` (a count) beside resources. Higher ``weight`` is tried first.
    A ``static`` pool (``spec.replicas``) keeps its own node count: its nodes take pods, but
    scheduling never plans a new NodeClaim on it.
    """

    name: NodePoolName
    requirements: Requirements = ANY
    labels: LabelPairs = attrs.field(converter=freeze_labels, default=())
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Resources = EMPTY
    weight: int = 0
    static: bool = False

    def template_requirements(self) -> Requirements:
        """Requirements plus the template's labels and ``karpenter.sh/nodepool``."""
        extra = [Requirement(k, False, frozenset({v})) for k, v in self.labels]
        extra.append(Requirement(wk.LABEL_NODEPOOL, False, frozenset({self.name})))
        return self.requirements.add(*extra)


@attrs.frozen
class Node:
    """An existing node, or an in-flight NodeClaim that has not become a node yet.

    ``pods`` are the pods bound (or nominated) to it; their requests use up ``allocatable``.
    """

    name: NodeName
    labels: LabelPairs = attrs.field(converter=freeze_labels, default=())
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = EMPTY
    capacity: Resources = EMPTY
    pods: tuple[Pod, ...] = ()
    nodepool: NodePoolName | None = None
    initialized: bool = True
    in_flight: bool = False

    def label_map(self) -> dict[str, str]:
        """Labels as a dict, with the hostname label defaulted to the node name."""
        out = dict(self.labels)
        out.setdefault(wk.LABEL_HOSTNAME, self.name)
        return out

    @functools.cached_property
    def labels_dict(self) -> Mapping[str, str]:
        """``label_map()`` computed once, shared: read it, never change it (every simulation
        builds a bin per node from it)."""
        return self.label_map()

    @functools.cached_property
    def label_requirements(self) -> Requirements:
        """The node's labels as requirements (each one a single value), computed once."""
        return Requirements.from_labels(self.labels_dict)

    def amounts(self, names: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Allocatable and requested amounts of `names`, in that order (kept per order of
        names: every simulation of a pass asks again with the same one)."""
        found = self._amounts.get(names)
        if found is None:
            found = (
                tuple(self.allocatable.get_amount(n) for n in names),
                tuple(self.requested.get_amount(n) for n in names),
            )
            self._amounts[names] = found
        return found

    @functools.cached_property
    def host_ports(self) -> tuple[HostPort, ...]:
        """Host ports its pods hold."""
        return tuple(hp for p in self.pods for hp in p.host_ports)

    @functools.cached_property
    def _amounts(self) -> dict[tuple[str, ...], tuple[tuple[int, ...], tuple[int, ...]]]:
        return {}

    @functools.cached_property
    def requested(self) -> Resources:
        """What its pods request together (summed once: every simulation reads it)."""
        used = EMPTY
        for pod in self.pods:
            used = used + pod.requests()
        return used


@attrs.frozen
class DaemonSet:
    """A DaemonSet, by the pod it would run on every node that admits it."""

    namespace: str
    name: str
    pod: Pod


@attrs.frozen
class ClusterSnapshot:
    """NodePools, their instance types, existing nodes and DaemonSets at one instant.

    ``instance_types`` maps a NodePool name to what the provider offers it (Karpenter's
    ``GetInstanceTypes(nodePool)``); ``namespaces`` maps a namespace to its labels, for affinity
    terms with a namespace selector.
    """

    nodepools: tuple[NodePool, ...] = ()
    instance_types: Mapping[str, tuple[InstanceType, ...]] = attrs.field(factory=dict)
    nodes: tuple[Node, ...] = ()
    daemonsets: tuple[DaemonSet, ...] = ()
    namespaces: Mapping[str, LabelPairs] = attrs.field(factory=dict)

    def types_for(self, pool: NodePool) -> tuple[InstanceType, ...]:
        """The instance types offered to ``pool`` (empty if none)."""
        return self.instance_types.get(pool.name, ())

    def ordered_nodepools(self) -> tuple[NodePool, ...]:
        """The NodePools new NodeClaims may come from (static ones never do), by weight
        (highest first), then name."""
        live = (p for p in self.nodepools if not p.static)
        return tuple(sorted(live, key=lambda p: (-p.weight, p.name)))

    def prefer_no_schedule(self) -> bool:
        """Does any NodePool or node carry a PreferNoSchedule taint (the one preference that
        lives on nodes rather than pods)?"""
        soft = Effect.PREFER_NO_SCHEDULE
        return any(t.effect is soft for p in self.nodepools for t in p.taints) or any(
            t.effect is soft for n in self.nodes for t in n.taints
        )
