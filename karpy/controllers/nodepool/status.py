"""NodePool status: what the pool holds and whether it can launch (Karpenter's nodepool.counter,
nodepool.readiness and nodepool.validation, written as one status patch).

* `status.resources` and `status.nodes`: the summed capacity and the number of the pool's
  NodeClaims (deleting ones included: they still hold their capacity, as Karpenter counts them).
  A pool with a cost limit (spec.limits karpy.sh/cost-per-hour) also gets its NodeClaims'
  summed hourly price under that key, each at its offering's price (instance type, zone and
  capacity type) in the cloud provider's instance types, or its type's dearest offering.
* `NodeClassReady`: the NodeClass the template references exists and is Ready (False with
  reason NodeClassNotFound or NodeClassNotReady otherwise; Unknown, reason UnsupportedNodeClass,
  when the reference names a kind the cloud provider does not serve).
* `ValidationSucceeded`: what the CRD's schema cannot check holds — the requirements form a
  satisfiable set, the durations and budget schedules parse, and so does the
  karpy.sh/extended-resource-initialization-timeout annotation, the cost limit is not
  negative, and a static NodePool (spec.replicas) has the StaticCapacity feature gate on
  (False with reason
  NodePoolValidationFailed and the error).
* `NodeRegistrationHealthy`: Unknown (reason AwaitingReconciliation) when the pool has none yet,
  or when the pool's spec (its generation, against the condition's observedGeneration) or its
  NodeClass (its generation, against `status.nodeClassObservedGeneration`) changed since it was
  set, and the pool's window of registration outcomes (karpy.state.registrationhealth) is
  emptied: what failed before says nothing of the new configuration. The NodeClaim lifecycle
  sets it True or False as nodes register or time out. It is not part of Ready: an unhealthy
  pool still launches (its next node may be the one that works), as in Karpenter.
* `Ready`: ValidationSucceeded and NodeClassReady are True (False when either is False, else
  Unknown, with reason UnhealthyDependents naming them). The provisioner skips a NodePool whose
  Ready is False.

Fed by NodePool events, events of the pool's NodeClaims and of NodeClasses (mapped to the pools
that reference them); everything is read from cluster state. The `karpy_nodepools_nodes`
gauge is set from the same numbers (usage and limits are the state gauges
`karpenter_nodepools_usage`/`_limit`).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.conditions import ConditionSet, find, with_condition
from karpy.apis.duration import parse_duration
from karpy.apis.meta import Condition, ConditionStatus, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import ConditionType, NodePool, NodePoolStatus
from karpy.cloudprovider import CloudProvider, CloudProviderError
from karpy.cloudprovider.requirements import (
    nodepool_requirements,
    quantities_from_resources,
    resources_from_quantities,
)
from karpy.core.disruption.cron import parse_schedule
from karpy.core.instancetypes import InstanceType
from karpy.core.resources import Resources, parse_quantity
from karpy.core.scheduling.cost import price_milli
from karpy.kube.client import KubeClient
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODEPOOLS
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.nodepools import extended_resource_timeout
from karpy.state.registrationhealth import RegistrationHealth
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

REASON_NODECLASS_NOT_FOUND: Final = "NodeClassNotFound"
REASON_NODECLASS_NOT_READY: Final = "NodeClassNotReady"
REASON_UNSUPPORTED_NODECLASS: Final = "UnsupportedNodeClass"
REASON_VALIDATION_FAILED: Final = "NodePoolValidationFailed"
REASON_AWAITING_RECONCILIATION: Final = "AwaitingReconciliation"
MESSAGE_AWAITING_RECONCILIATION: Final = "object is awaiting reconciliation"
READY_DEPENDENTS: Final = (ConditionType.VALIDATION_SUCCEEDED, ConditionType.NODE_CLASS_READY)
NODEPOOL_CONDITIONS: Final = ConditionSet(dependents=READY_DEPENDENTS, root=ConditionType.READY)


STATIC_CAPACITY_OFF: Final = (
    "spec.replicas: static NodePools need the StaticCapacity feature gate "
    "(FEATURE_GATES=StaticCapacity=true); without it nothing acts on replicas"
)


def validation_error(nodepool: NodePool, *, static_capacity: bool = False) -> str | None:
    """Why `nodepool` fails runtime validation, or None when it passes. `static_capacity` is
    the StaticCapacity feature gate: without it a static NodePool (spec.replicas) fails."""
    if nodepool.spec.replicas is not None and not static_capacity:
        return STATIC_CAPACITY_OFF
    try:
        nodepool_requirements(nodepool)
        extended_resource_timeout(nodepool, default=None)
        cost = nodepool.spec.limits.get(wk.LIMIT_COST_PER_HOUR)
        if cost is not None and str(cost).startswith("-"):
            msg = f"spec.limits[{wk.LIMIT_COST_PER_HOUR}]: must not be negative, got {cost!r}"
            raise ValueError(msg)
        spec = nodepool.spec.template.spec
        parse_duration(spec.expire_after, field_name="spec.template.spec.expireAfter")
        if spec.termination_grace_period is not None:
            parse_duration(
                spec.termination_grace_period,
                field_name="spec.template.spec.terminationGracePeriod",
            )
        disruption = nodepool.spec.disruption
        parse_duration(disruption.consolidate_after, field_name="spec.disruption.consolidateAfter")
        for i, budget in enumerate(disruption.budgets):
            if budget.schedule is not None:
                try:
                    parse_schedule(budget.schedule)
                except ValueError as error:
                    msg = f"spec.disruption.budgets[{i}].schedule: {error}"
                    raise ValueError(msg) from error
    except ValueError as error:
        return str(error)
    return None


class NodePoolStatusController:
    """Reconcile one NodePool's status (the key) as the module docstring says."""

    name: ClassVar[str] = "nodepool.status"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        telemetry: Telemetry,
        nodeclass_kinds: Mapping[tuple[str, str], ResourceKind[Any]],
        registration_health: RegistrationHealth | None = None,
        cloudprovider: CloudProvider | None = None,
        static_capacity: bool = False,
    ) -> None:
        """`nodeclass_kinds`: the informed NodeClass kinds by (group, kind);
        `registration_health`: the pools' registration outcomes, shared with the NodeClaim
        lifecycle (a private one when not given); `cloudprovider`: prices the NodeClaims of
        pools with a cost limit; `static_capacity`: the StaticCapacity feature gate (a static
        NodePool fails validation without it)."""
        self._static_capacity = static_capacity
        self._cloudprovider = cloudprovider
        self._registration_health = (
            registration_health if registration_health is not None else RegistrationHealth()
        )
        self._client = client
        self._view = view
        self._clock = clock
        self._metrics = telemetry.metrics.upkeep
        self._nodeclass_kinds = nodeclass_kinds

    def spec(self) -> Controller:
        """Keyed by NodePool name: its own changes, its NodeClaims' (its counts and resources),
        and its NodeClass's (its NodeClassReady condition)."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=NODEPOOLS),
                Watch(kind=NODECLAIMS, keys=_pool_of_claim),
                *(
                    Watch(kind=kind, keys=self._pools_of_nodeclass)
                    for kind in self._nodeclass_kinds.values()
                ),
            ),
            reads=CORE_KINDS,
        )

    def _pools_of_nodeclass(self, event: Event[Any]) -> Iterable[str]:
        name = event.item.ref.name
        return [
            pool.metadata.name or ""
            for pool in self._view.nodepools()
            if pool.spec.template.spec.node_class_ref.name == name
        ]

    async def reconcile(self, name: str) -> Result:
        """Side effects: one status patch when anything changed; the pool's gauges."""
        with bind(controller=self.name, nodepool=name):
            nodepool = self._view.nodepool(name)
            if nodepool is None:
                return Result()
            status = self._status(nodepool, cost=await self._cost(nodepool))
            self._record(name, status)
            if status == nodepool.status:
                return Result()
            await self._client.patch_status(
                NODEPOOLS,
                name,
                status,
                previous=nodepool.status,
                resource_version=nodepool.metadata.resource_version,
            )
            return Result()

    async def _cost(self, nodepool: NodePool) -> int | None:
        """The pool's NodeClaims' summed hourly price in milli-units, when it has a cost limit
        (None otherwise, or without a cloud provider to price them)."""
        if wk.LIMIT_COST_PER_HOUR not in nodepool.spec.limits or self._cloudprovider is None:
            return None
        try:
            offered = await self._cloudprovider.get_instance_types(nodepool)
        except CloudProviderError as error:
            # Prices are not worth holding the pool's conditions back: the cost already shown
            # stays until the next reconcile prices it.
            log.warning("failed pricing nodepool nodeclaims", extra={"error": str(error)})
            shown = nodepool.status.resources.get(wk.LIMIT_COST_PER_HOUR)
            return None if shown is None else parse_quantity(str(shown))
        types = {t.name: t for t in offered}
        return sum(_price_milli(claim, types) for claim in self._claims(nodepool))

    def _claims(self, nodepool: NodePool) -> list[NodeClaim]:
        return self._view.nodeclaims_of(nodepool.metadata.name or "")

    def _status(self, nodepool: NodePool, *, cost: int | None = None) -> NodePoolStatus:
        claims = self._claims(nodepool)
        total = Resources()
        for claim in claims:
            total = total + resources_from_quantities(
                claim.status.capacity, field=f"nodeclaim {claim.metadata.name} status.capacity"
            )
        now = self._clock.now()
        conditions = nodepool.status.conditions
        nodeclass_status, nodeclass_reason, nodeclass_message = self._nodeclass_ready(nodepool)
        conditions = with_condition(
            conditions,
            ConditionType.NODE_CLASS_READY,
            nodeclass_status,
            reason=nodeclass_reason,
            message=nodeclass_message,
            now=now,
        )
        error = validation_error(nodepool, static_capacity=self._static_capacity)
        conditions = with_condition(
            conditions,
            ConditionType.VALIDATION_SUCCEEDED,
            ConditionStatus.TRUE if error is None else ConditionStatus.FALSE,
            reason="ValidationSucceeded" if error is None else REASON_VALIDATION_FAILED,
            message=error or "",
            now=now,
        )
        conditions, observed = self._registration_reset(nodepool, conditions, now=now)
        resources = quantities_from_resources(total)
        if cost is not None:
            resources[wk.LIMIT_COST_PER_HOUR] = Quantity(f"{cost / 1000:g}")
        return attrs.evolve(
            nodepool.status,
            resources=resources,
            nodes=len(claims),
            node_class_observed_generation=observed,
            conditions=NODEPOOL_CONDITIONS.with_root(conditions, now=now),
        )

    def _registration_reset(
        self, nodepool: NodePool, conditions: tuple[Condition, ...], *, now: datetime.datetime
    ) -> tuple[tuple[Condition, ...], int | None]:
        """NodeRegistrationHealthy back to Unknown after a spec or NodeClass change, and the
        NodeClass generation seen. Side effect: the pool's outcome window is emptied then."""
        observed = nodepool.status.node_class_observed_generation
        nodeclass = self._nodeclass(nodepool)
        if nodeclass is None:
            return conditions, observed
        generation = getattr(getattr(nodeclass, "metadata", None), "generation", None)
        current = find(conditions, ConditionType.NODE_REGISTRATION_HEALTHY)
        if (
            current is None
            or observed != generation
            or current.observed_generation != nodepool.metadata.generation
        ):
            conditions = with_condition(
                conditions,
                ConditionType.NODE_REGISTRATION_HEALTHY,
                ConditionStatus.UNKNOWN,
                reason=REASON_AWAITING_RECONCILIATION,
                message=MESSAGE_AWAITING_RECONCILIATION,
                now=now,
                generation=nodepool.metadata.generation,
            )
            self._registration_health.reset(nodepool.metadata.uid or "")
        return conditions, generation

    def _nodeclass(self, nodepool: NodePool) -> object | None:
        ref = nodepool.spec.template.spec.node_class_ref
        kind = self._nodeclass_kinds.get((ref.group, ref.kind))
        return None if kind is None else self._view.get(kind, ref.name)

    def _nodeclass_ready(self, nodepool: NodePool) -> tuple[ConditionStatus, str, str]:
        ref = nodepool.spec.template.spec.node_class_ref
        kind = self._nodeclass_kinds.get((ref.group, ref.kind))
        described = f"{ref.kind} {ref.name!r} ({ref.group})"
        if kind is None:
            message = f"{ref.group}/{ref.kind} is not a NodeClass kind the cloud provider serves"
            return ConditionStatus.UNKNOWN, REASON_UNSUPPORTED_NODECLASS, message
        nodeclass = self._view.get(kind, ref.name)
        if nodeclass is None:
            return ConditionStatus.FALSE, REASON_NODECLASS_NOT_FOUND, f"{described} not found"
        ready = find(_conditions_of(nodeclass), "Ready")
        if ready is None:
            return ConditionStatus.UNKNOWN, REASON_NODECLASS_NOT_READY, f"{described}: no Ready"
        if ready.status is ConditionStatus.TRUE:
            return ConditionStatus.TRUE, "NodeClassReady", ""
        return ready.status, REASON_NODECLASS_NOT_READY, f"{described} is not Ready"

    def _record(self, name: str, status: NodePoolStatus) -> None:
        self._metrics.nodepools_nodes.set(status.nodes or 0, {"nodepool": name})


def _conditions_of(nodeclass: object) -> tuple[Condition, ...]:
    """A NodeClass's status.conditions (every provider's NodeClass model has them)."""
    status = getattr(nodeclass, "status", None)
    conditions = getattr(status, "conditions", ())
    return tuple(c for c in conditions if isinstance(c, Condition))


def _pool_of_claim(event: Event[Any]) -> Iterable[str]:
    """The NodePool a changed NodeClaim belongs to."""
    pool = event.item.obj.metadata.labels.get(wk.LABEL_NODEPOOL)
    return (pool,) if pool else ()


def _price_milli(claim: NodeClaim, types: Mapping[str, InstanceType]) -> int:
    """What `claim` costs an hour (milli-units, rounded up): its offering's price, else its
    type's dearest offering's; 0 for a type the provider does not list (or not yet chosen)."""
    labels = claim.metadata.labels
    found = types.get(labels.get(wk.LABEL_INSTANCE_TYPE, ""))
    if found is None:
        return 0
    for offering in found.offerings:
        if (offering.zone, offering.capacity_type) == (
            labels.get(wk.LABEL_TOPOLOGY_ZONE),
            labels.get(wk.LABEL_CAPACITY_TYPE),
        ):
            return price_milli(offering.price)
    return price_milli(max((o.price for o in found.offerings), default=0.0))
