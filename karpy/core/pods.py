"""The scheduling core's view of a pod, and the effective-request formula.

Pure values: only the fields that decide placement, shaped so that a translation layer can map a
Kubernetes Pod onto them one to one (containers, init containers with restartPolicy=Always
sidecars, overhead, nodeSelector, node affinity, tolerations, topology spread, pod (anti-)affinity,
host ports, volume topology, priority). Keeping the core off the Kubernetes API models lets it be
tested, benchmarked and reasoned about without a cluster.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from typing import Final, NewType

import attrs

from karpy.core.requirements import ANY, Requirement, Requirements
from karpy.core.resources import EMPTY, PODS, Resources
from karpy.core.taints import Toleration

PodUID = NewType("PodUID", str)

LabelPairs = tuple[tuple[str, str], ...]


def freeze_labels(labels: Mapping[str, str] | Iterable[tuple[str, str]]) -> LabelPairs:
    """Labels as a sorted tuple of pairs (hashable, stable order)."""
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    return tuple(sorted(dict(pairs).items()))


@attrs.frozen(cache_hash=True)
class Container:
    """A container's requests. ``restart_always`` marks a sidecar init container (KEP-753)."""

    name: str
    requests: Resources = EMPTY
    restart_always: bool = False


@attrs.frozen(cache_hash=True)
class LabelSelector:
    """A Kubernetes label selector as requirements (matchLabels become ``In``).

    A nil selector matches no pod, as in Kubernetes: use ``NOTHING`` for it.
    """

    requirements: Requirements = ANY
    nothing: bool = False

    @classmethod
    def of(
        cls, match_labels: Mapping[str, str] | None = None, expressions: Iterable[Requirement] = ()
    ) -> LabelSelector:
        """Build from matchLabels and matchExpressions."""
        reqs = [Requirement(k, False, frozenset({v})) for k, v in (match_labels or {}).items()]
        reqs.extend(expressions)
        return cls(Requirements(reqs))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Label-selector semantics (NotIn and DoesNotExist match absent labels)."""
        return not self.nothing and self.requirements.matches_labels(labels) is None


NOTHING: Final = LabelSelector(nothing=True)
"""A missing (nil) selector: matches no pod."""


@attrs.frozen(cache_hash=True)
class PodAffinityTerm:
    """A (anti-)affinity term: pods matching ``selector`` in ``namespaces`` per ``topology_key``.

    An empty ``namespaces`` with no ``namespace_selector`` means the pod's own namespace.
    """

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None


@attrs.frozen(cache_hash=True)
class WeightedPodAffinityTerm:
    """A preferred (anti-)affinity term."""

    weight: int
    term: PodAffinityTerm


class WhenUnsatisfiable(enum.StrEnum):
    """Topology spread: hard or soft."""

    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class InclusionPolicy(enum.StrEnum):
    """nodeAffinityPolicy / nodeTaintsPolicy."""

    HONOR = "Honor"
    IGNORE = "Ignore"


@attrs.frozen(cache_hash=True)
class TopologySpreadConstraint:
    """A topology spread constraint (defaults as Kubernetes applies them)."""

    topology_key: str
    max_skew: int
    selector: LabelSelector
    when_unsatisfiable: WhenUnsatisfiable = WhenUnsatisfiable.DO_NOT_SCHEDULE
    min_domains: int | None = None
    node_affinity_policy: InclusionPolicy = InclusionPolicy.HONOR
    node_taints_policy: InclusionPolicy = InclusionPolicy.IGNORE
    match_label_keys: tuple[str, ...] = ()


@attrs.frozen(cache_hash=True)
class PreferredSchedulingTerm:
    """A preferred node-affinity term."""

    weight: int
    requirements: Requirements


@attrs.frozen(cache_hash=True)
class HostPort:
    """A host port a container binds; ``0.0.0.0`` conflicts with every IP."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"  # noqa: S104 -- Kubernetes' default meaning "all addresses"

    def conflicts(self, other: HostPort) -> bool:
        """Kubernetes' host-port conflict rule."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wildcard = "0.0.0.0"  # noqa: S104 -- the wildcard address, not a bind
        return self.host_ip == other.host_ip or wildcard in (self.host_ip, other.host_ip)


ONE_POD: Final = Resources.milli({PODS: 1000})


@attrs.frozen(cache_hash=True)
class Pod:
    """A pod as the scheduler sees it.

    ``creation`` orders pods (it stands for creationTimestamp); ``owner`` is a stable key of the
    controlling object (for example ``apps/ReplicaSet/default/web-5f7``) and groups identical pods.
    ``volume_requirements`` lists alternatives (OR): the node must satisfy at least one.
    """

    uid: PodUID
    namespace: str
    name: str
    labels: LabelPairs = attrs.field(converter=freeze_labels, default=())
    owner: str | None = None
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: Resources = EMPTY
    node_selector: LabelPairs = attrs.field(converter=freeze_labels, default=())
    required_node_affinity: tuple[Requirements, ...] = ()
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volume_requirements: tuple[Requirements, ...] = ()
    priority: int = 0
    creation: int = 0

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def label_map(self) -> dict[str, str]:
        """Labels as a dict."""
        return dict(self.labels)

    def requests(self) -> Resources:
        """Effective requests (see ``effective_requests``)."""
        return self._requests

    @functools.cached_property
    def _requests(self) -> Resources:
        # Computed once per pod: every scheduling simulation sums the requests of every pod
        # bound to every node, and a consolidation pass runs dozens of simulations.
        return effective_requests(self)


def effective_requests(pod: Pod) -> Resources:
    """kube-scheduler's sidecar-aware formula, plus exactly one ``pods`` slot.

    max(Σ containers + Σ sidecars, max over plain init containers of (init + sidecars started
    before it), sidecars' running total) + overhead, taken resource by resource.
    """
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod.init_containers:
        if init.restart_always:
            for name, amount in init.requests.items_:
                sidecars[name] = sidecars.get(name, 0) + amount
            candidate = sidecars
        else:
            candidate = dict(sidecars)
            for name, amount in init.requests.items_:
                candidate[name] = candidate.get(name, 0) + amount
        for name, amount in candidate.items():
            if amount > init_peak.get(name, 0):
                init_peak[name] = amount
    running: dict[str, int] = dict(sidecars)
    for container in pod.containers:
        for name, amount in container.requests.items_:
            running[name] = running.get(name, 0) + amount
    total = {n: max(running.get(n, 0), init_peak.get(n, 0)) for n in running.keys() | init_peak}
    for name, amount in pod.overhead.items_:
        total[name] = total.get(name, 0) + amount
    # A pod takes exactly one of a node's pod slots, as kube-scheduler counts them: a ``pods``
    # amount in its overhead (or anywhere else) does not take more.
    total.pop(PODS, None)
    return Resources.milli(total) + ONE_POD
