"""The gauges that describe the cluster as it is, read from cluster state at each scrape.

Karpenter's node, pod and NodePool metrics controllers rewrite gauges on every reconcile and
delete the series of objects that went away. Here each gauge is an OpenTelemetry observable whose
callback reads the informer-backed `ClusterView` when Prometheus scrapes, so a deleted node's
series vanishes with it and nothing is ever stale by more than the informers are.

Cost (Karpenter's karpenter_nodepools_cost_total): each NodeClaim's price is the price of the
offering it runs on (its instance type, zone and capacity type, from the provider's instance types
for its NodePool), summed by NodePool in dollars per hour. Prices come from the provider, which is
async, so this controller's only loop refreshes a price table (and the instance-type gauges) every
`period` seconds; the scrape-time callbacks read that table.
"""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from karpy.apis.kube.node import Node
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import CloudProvider
from karpy.controllers.metrics.pods import is_running
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.kube.resources import ResourceKind
from karpy.manager import Singleton
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import (
    CONDITIONED,
    TERMINATING,
    Attributes,
    Observe,
    Telemetry,
    observe_state,
)
from karpy.state.pods import is_daemon_owned, is_terminal
from karpy.state.podview import ObjectError, TranslationError, resources_of
from karpy.state.snapshot import translate_pod
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

PRICE_REFRESH: Final = 60.0
"""Seconds between refreshes of the offering prices cost is computed from."""

#: Karpenter reports CPU in cores and the rest in base units; Resources hold thousandths.
_MILLI: Final = 1000.0

Offering = tuple[str, str, str]
"""(instance type, zone, capacity type)."""


class StateMetrics:
    """Registers the state gauges on `telemetry`'s meter and keeps offering prices fresh."""

    name = "metrics.state"

    def __init__(
        self,
        view: ClusterView,
        *,
        cloudprovider: CloudProvider,
        telemetry: Telemetry,
        clock: Clock | None = None,
        period: float = PRICE_REFRESH,
        nodeclass_kinds: Sequence[ResourceKind[Any]] = (),
    ) -> None:
        self._view = view
        # The provider's NodeClass kinds, by operatorpkg's lower-cased name, for their
        # operator_<kind>_* gauges (a kind without such gauges is not described).
        self._nodeclasses = {k.kind.lower(): k for k in nodeclass_kinds}
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._cloudprovider = cloudprovider
        self._period = period
        self._prices: dict[str, dict[Offering, float]] = {}
        self._offerings: dict[Offering, tuple[float, bool]] = {}
        self._shapes: dict[str, tuple[float, float]] = {}
        self._unsynced_since: datetime.datetime | None = None
        observe_state(telemetry.meter, self.sources())

    def spec(self) -> Singleton:
        """A pass at start, then one each price refresh period (the pass asks for it)."""
        return Singleton(
            name=self.name,
            reconcile=self.reconcile_once,
            reads=(NODES, PODS, NODECLAIMS, NODEPOOLS),
        )

    def sources(self) -> dict[str, Observe]:
        return {
            "nodes_allocatable": self._allocatable,
            "nodes_total_pod_requests": lambda: self._requests(daemons=False),
            "nodes_total_daemon_requests": lambda: self._requests(daemons=True),
            "pods_state": self._pods,
            "nodepools_usage": self._usage,
            "nodepools_limit": self._limits,
            "cluster_state_node_count": lambda: [(float(len(self._view.nodes())), {})],
            "nodeclaims_count": self._nodeclaims,
            "nodepools_cost": self._cost,
            "cluster_state_unsynced_time_seconds": self._unsynced,
            "pods_unbound_time_seconds": partial(self._waiting, started=False),
            "pods_unstarted_time_seconds": partial(self._waiting, started=True),
            "nodes_total_pod_limits": partial(self._limits_on_nodes, daemons=False),
            "nodes_total_daemon_limits": partial(self._limits_on_nodes, daemons=True),
            "nodes_system_overhead": self._overhead,
            "nodes_current_lifetime_seconds": self._lifetimes,
            "cluster_utilization_percent": self._utilization,
            "instance_type_offering_price_estimate": lambda: [
                (price, _offering_labels(key)) for key, (price, _) in self._offerings.items()
            ],
            "instance_type_offering_available": lambda: [
                (float(available), _offering_labels(key))
                for key, (_, available) in self._offerings.items()
            ],
            "instance_type_cpu_cores": lambda: [
                (cpu, {"instance_type": name}) for name, (cpu, _) in self._shapes.items()
            ],
            "instance_type_memory_bytes": lambda: [
                (memory, {"instance_type": name}) for name, (_, memory) in self._shapes.items()
            ],
            **{
                f"{kind}_termination_current_time_seconds": partial(self._terminating, kind)
                for kind in TERMINATING
            },
            **{
                f"{kind}_status_condition_count": partial(self._conditions, kind, count=True)
                for kind in CONDITIONED
            },
            **{
                f"{kind}_status_condition_current_status_seconds": partial(
                    self._conditions, kind, count=False
                )
                for kind in CONDITIONED
            },
        }

    async def reconcile_once(self) -> Result:
        """Refresh the price of every offering of every NodePool's instance types."""
        await self._view.wait_synced()
        prices: dict[str, dict[Offering, float]] = {}
        offerings: dict[Offering, tuple[float, bool]] = {}
        shapes: dict[str, tuple[float, float]] = {}
        for pool in self._view.nodepools():
            name = pool.metadata.name or ""
            table = prices[name] = {}
            for instance_type in await self._cloudprovider.get_instance_types(pool):
                capacity = instance_type.capacity
                shapes[instance_type.name] = (
                    capacity.get_amount("cpu") / _MILLI,
                    capacity.get_amount("memory") / _MILLI,
                )
                for offering in instance_type.offerings:
                    key = (instance_type.name, offering.zone, offering.capacity_type)
                    table[key] = offering.price
                    offerings[key] = (offering.price, offering.available)
        self._prices = prices
        self._offerings = offerings
        self._shapes = shapes
        return Result(requeue_after=self._period)

    # ------------------------------------------------------------------ observations

    def _managed_nodes(self) -> list[Node]:
        return [n for n in self._view.nodes() if wk.LABEL_NODEPOOL in n.metadata.labels]

    def _allocatable(self) -> Iterable[tuple[float, Attributes]]:
        for node in self._managed_nodes():
            amounts = resources_of(node.status.allocatable, field="status.allocatable")
            for resource, milli in amounts.items():
                yield milli / _MILLI, {**_node_labels(node), "resource_type": resource}

    def _requests(self, *, daemons: bool) -> Iterable[tuple[float, Attributes]]:
        for node in self._managed_nodes():
            totals: dict[str, int] = defaultdict(int)
            for kube_pod in self._view.pods_on(node.metadata.name or ""):
                if is_terminal(kube_pod) or is_daemon_owned(kube_pod) != daemons:
                    continue
                pod = translate_pod(kube_pod)
                if isinstance(pod, ObjectError):
                    continue  # a pod the core cannot read is reported by the provisioner
                for resource, milli in pod.requests().items():
                    if resource != "pods":
                        totals[resource] += milli
            for resource, milli in totals.items():
                yield milli / _MILLI, {**_node_labels(node), "resource_type": resource}

    def _waiting(self, *, started: bool) -> Iterable[tuple[float, Attributes]]:
        """Pods not yet bound (or, with `started`, not yet running): seconds since creation."""
        now = self._clock.now()
        for pod in self._view.pods():
            created = pod.metadata.creation_timestamp
            if created is None or is_terminal(pod) or pod.metadata.deletion_timestamp is not None:
                continue
            waiting = not is_running(pod) if started else not pod.spec.node_name
            if waiting:
                yield (
                    max(0.0, (now - created).total_seconds()),
                    {"name": pod.metadata.name or "", "namespace": pod.metadata.namespace or ""},
                )

    def _unsynced(self) -> Iterable[tuple[float, Attributes]]:
        now = self._clock.now()
        if self._view.synced:
            self._unsynced_since = None
        elif self._unsynced_since is None:
            self._unsynced_since = now
        since = self._unsynced_since
        return [(max(0.0, (now - since).total_seconds()) if since is not None else 0.0, {})]

    def _limits_on_nodes(self, *, daemons: bool) -> Iterable[tuple[float, Attributes]]:
        for node in self._managed_nodes():
            totals: dict[str, int] = defaultdict(int)
            for kube_pod in self._view.pods_on(node.metadata.name or ""):
                if is_terminal(kube_pod) or is_daemon_owned(kube_pod) != daemons:
                    continue
                for container in kube_pod.spec.containers:
                    try:
                        limits = resources_of(container.resources.limits, field="limits")
                    except TranslationError:
                        continue  # a pod the core cannot read is reported by the provisioner
                    for resource, milli in limits.items():
                        totals[resource] += milli
            for resource, milli in totals.items():
                yield milli / _MILLI, {**_node_labels(node), "resource_type": resource}

    def _overhead(self) -> Iterable[tuple[float, Attributes]]:
        for node in self._managed_nodes():
            capacity = resources_of(node.status.capacity, field="status.capacity")
            allocatable = resources_of(node.status.allocatable, field="status.allocatable")
            for resource, milli in capacity.items():
                if resource in allocatable:
                    held = milli - allocatable.get_amount(resource)
                    yield held / _MILLI, {**_node_labels(node), "resource_type": resource}

    def _lifetimes(self) -> Iterable[tuple[float, Attributes]]:
        now = self._clock.now()
        for node in self._managed_nodes():
            created = node.metadata.creation_timestamp
            if created is not None:
                yield (
                    max(0.0, (now - created).total_seconds()),
                    {
                        "node_name": node.metadata.name or "",
                        "nodepool": node.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
                    },
                )

    def _utilization(self) -> Iterable[tuple[float, Attributes]]:
        allocatable: dict[str, float] = defaultdict(float)
        requested: dict[str, float] = defaultdict(float)
        for value, labels in self._allocatable():
            allocatable[labels["resource_type"]] += value
        for daemons in (False, True):
            for value, labels in self._requests(daemons=daemons):
                requested[labels["resource_type"]] += value
        for resource, total in sorted(allocatable.items()):
            if total > 0:
                yield 100.0 * requested[resource] / total, {"resource_type": resource}

    def _objects(self, kind: str) -> Iterable[Any]:
        """The objects of `kind`: Nodes, NodeClaims, NodePools or a NodeClass kind (none of a
        NodeClass kind the provider does not have)."""
        if kind == "node":
            return self._view.nodes()
        if kind == "nodeclaim":
            return self._view.nodeclaims()
        if kind == "nodepool":
            return self._view.nodepools()
        nodeclass = self._nodeclasses.get(kind)
        return self._view.objects(nodeclass) if nodeclass is not None else ()

    def _terminating(self, kind: str) -> Iterable[tuple[float, Attributes]]:
        now = self._clock.now()
        for obj in self._objects(kind):
            deleted = obj.metadata.deletion_timestamp
            if deleted is not None:
                yield (
                    max(0.0, (now - deleted).total_seconds()),
                    {"name": obj.metadata.name or "", "namespace": obj.metadata.namespace or ""},
                )

    def _conditions(self, kind: str, *, count: bool) -> Iterable[tuple[float, Attributes]]:
        """1 per condition (`count`), or the seconds since each condition's last transition."""
        now = self._clock.now()
        for obj in self._objects(kind):
            for condition in obj.status.conditions:
                since = condition.last_transition_time
                seconds = (now - since).total_seconds() if since is not None else 0.0
                yield (
                    1.0 if count else seconds,
                    {
                        "name": obj.metadata.name or "",
                        "namespace": obj.metadata.namespace or "",
                        "type": condition.type,
                        "status": str(condition.status),
                        "reason": condition.reason or "",
                    },
                )

    def _pods(self) -> Iterable[tuple[float, Attributes]]:
        for pod in self._view.pods():
            node_name = pod.spec.node_name or ""
            node = self._view.node(node_name) if node_name else None
            labels = node.metadata.labels if node is not None else {}
            yield (
                1.0,
                {
                    "name": pod.metadata.name or "",
                    "namespace": pod.metadata.namespace or "",
                    "node": node_name,
                    "nodepool": labels.get(wk.LABEL_NODEPOOL, ""),
                    "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
                    "arch": labels.get(wk.LABEL_ARCH, ""),
                    "capacity_type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                    "instance_type": labels.get(wk.LABEL_INSTANCE_TYPE, ""),
                    "phase": str(pod.status.phase or ""),
                },
            )

    def _usage(self) -> Iterable[tuple[float, Attributes]]:
        totals: dict[tuple[str, str], int] = defaultdict(int)
        for claim in self._view.nodeclaims():
            pool = claim.metadata.labels.get(wk.LABEL_NODEPOOL, "")
            capacity = resources_of(claim.status.capacity, field="status.capacity")
            for resource, milli in capacity.items():
                totals[pool, resource] += milli
        for (pool, resource), milli in sorted(totals.items()):
            yield milli / _MILLI, {"nodepool": pool, "resource_type": resource}

    def _limits(self) -> Iterable[tuple[float, Attributes]]:
        for pool in self._view.nodepools():
            limits = resources_of(pool.spec.limits, field="spec.limits")
            for resource, milli in limits.items():
                yield (
                    milli / _MILLI,
                    {"nodepool": pool.metadata.name or "", "resource_type": resource},
                )

    def _nodeclaims(self) -> Iterable[tuple[float, Attributes]]:
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        for claim in self._view.nodeclaims():
            labels = claim.metadata.labels
            counts[
                labels.get(wk.LABEL_NODEPOOL, ""),
                labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                _phase(claim),
            ] += 1
        for (pool, capacity_type, phase), count in sorted(counts.items()):
            yield float(count), {"nodepool": pool, "capacity_type": capacity_type, "state": phase}

    def _cost(self) -> Iterable[tuple[float, Attributes]]:
        pools: dict[str, float] = defaultdict(float)
        for (pool, _), dollars in cost_by_nodepool(self._view.nodeclaims(), self._prices).items():
            pools[pool] += dollars
        for pool, dollars in sorted(pools.items()):
            yield dollars, {"nodepool": pool}


def cost_by_nodepool(
    claims: Iterable[NodeClaim], prices: Mapping[str, Mapping[Offering, float]]
) -> dict[tuple[str, str], float]:
    """Dollars per hour of the launched NodeClaims, by (nodepool, capacity type). A NodeClaim
    whose offering has no known price (not launched yet, or gone from the catalog) adds nothing."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for claim in claims:
        labels = claim.metadata.labels
        pool = labels.get(wk.LABEL_NODEPOOL, "")
        offering = (
            labels.get(wk.LABEL_INSTANCE_TYPE, ""),
            labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
            labels.get(wk.LABEL_CAPACITY_TYPE, ""),
        )
        price = prices.get(pool, {}).get(offering)
        if price is not None and claim.status.provider_id:
            totals[pool, offering[2]] += price
    return dict(totals)


def _offering_labels(key: Offering) -> Attributes:
    instance_type, zone, capacity_type = key
    return {"instance_type": instance_type, "capacity_type": capacity_type, "zone": zone}


def _node_labels(node: Node) -> dict[str, str]:
    labels = node.metadata.labels
    return {
        "node_name": node.metadata.name or "",
        "nodepool": labels.get(wk.LABEL_NODEPOOL, ""),
        "instance_type": labels.get(wk.LABEL_INSTANCE_TYPE, ""),
        "capacity_type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
        "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
    }


def _phase(claim: NodeClaim) -> str:
    status = {c.type: c.status for c in claim.status.conditions}
    for phase in ("Ready", "Initialized", "Registered", "Launched"):
        if status.get(phase) == "True":
            return phase.lower()
    return "pending"
