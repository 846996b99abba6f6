"""The NodeClaim conditions disruption acts on: `Drifted` and `Consolidatable` (Karpenter's
nodeclaim.disruption controller).

The disruption controller replaces Drifted nodes and removes or consolidates Consolidatable
ones; this controller only marks them, on one working copy written as one status patch at the
version read.

**Drifted** (status True, reason and message the drift reason; removed when no longer
drifted; never set before the NodeClaim is Launched). Checked in Karpenter's order, the first
answer wins:

1. ``NodePoolDrifted``: the NodeClaim's `karpenter.sh/nodepool-hash` differs from its
   NodePool's (same hash version; karpy.core.drift).
2. ``RequirementsDrifted``: its labels no longer satisfy the NodePool's requirements.
3. ``InstanceTypeNotFound``: its instance type is no longer among the provider's types for the
   NodePool. Asked only of NodeClaims older than an hour, at most every 30 minutes each (it lists
   every instance type).
4. the provider's own reason, from `CloudProvider.is_drifted` (AWS: NodeClassDrift, AMIDrift,
   SecurityGroupDrift, SubnetDrift; kwok: NodeClassDrift).

Rechecked every 5 minutes and whenever the NodeClaim, its NodePool or its NodeClass changes.

**Consolidatable** (True once the NodePool's consolidateAfter has passed since the last pod
event on the node, or since it was Initialized when no pod event came yet; removed while the
NodeClaim is not Initialized, while the time has not passed, and when consolidateAfter is
Never). Requeued for the moment it becomes due.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.conditions import find, is_true, with_condition, without_condition
from karpy.apis.duration import parse_duration
from karpy.apis.meta import Condition, ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import NodeClaimNotFoundError, NodeClassNotReadyError
from karpy.cloudprovider.protocol import CloudProvider
from karpy.cloudprovider.requirements import nodepool_requirements
from karpy.core.drift import HASH_VERSION, DriftReason, requirements_drift, static_drift
from karpy.kube.client import KubeClient
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODEPOOLS
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.nodepools import nodepool_hash
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

DRIFT_RECHECK: Final = 300.0
"""Seconds between drift checks of a NodeClaim (Karpenter's 5 minutes)."""
INSTANCE_TYPE_CHECK_AGE: Final = 3600.0
"""A NodeClaim younger than this (seconds) is not checked for InstanceTypeNotFound."""
INSTANCE_TYPE_CHECK_PERIOD: Final = 1800.0
"""Seconds between InstanceTypeNotFound checks of one NodeClaim."""
PROVIDER_TIMEOUT: Final = 60.0
"""Seconds allowed for one provider call (instance types, is_drifted)."""


class NodeClaimDisruptionController:
    """Reconcile the Drifted and Consolidatable conditions of one NodeClaim (the key)."""

    name: ClassVar[str] = "nodeclaim.disruption"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        cloudprovider: CloudProvider,
        *,
        clock: Clock,
        telemetry: Telemetry,
        loop_time: Callable[[], float] | None = None,
        nodeclass_kinds: Sequence[ResourceKind[Any]] = (),
    ) -> None:
        """`nodeclass_kinds`: the informed NodeClass kinds, whose changes may drift claims."""
        self._client = client
        self._view = view
        self._cloud = cloudprovider
        self._clock = clock
        self._metrics = telemetry.metrics.upkeep
        self._loop_time = loop_time
        self._type_checked: dict[str, float] = {}
        self._nodeclass_kinds = tuple(nodeclass_kinds)
        self._pools_seen: dict[str, tuple[object, ...]] = {}

    def spec(self) -> Controller:
        """Keyed by NodeClaim name: its own changes, its NodePool's (see `_claims_of_pool`) and
        its NodeClass's."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=NODECLAIMS),
                Watch(kind=NODEPOOLS, keys=self._claims_of_pool),
                *(
                    Watch(kind=kind, keys=self._claims_of_nodeclass)
                    for kind in self._nodeclass_kinds
                ),
            ),
            reads=CORE_KINDS,
        )

    def _claims_of_pool(self, event: Event[Any]) -> Iterable[str]:
        """The pool's NodeClaims, only when what drift reads changed (its spec, by generation,
        or its hash), not on each of the pool's own status writes."""
        name = event.item.ref.name
        meta = event.item.obj.metadata
        key = (meta.generation, meta.annotations.get(wk.ANNOTATION_NODEPOOL_HASH))
        if event.type is EventType.DELETED:
            self._pools_seen.pop(name, None)
            return ()
        if self._pools_seen.get(name) == key:
            return ()
        self._pools_seen[name] = key
        return [claim.metadata.name or "" for claim in self._view.nodeclaims_of(name)]

    def _claims_of_nodeclass(self, event: Event[Any]) -> Iterable[str]:
        name = event.item.ref.name
        return [
            claim.metadata.name or ""
            for claim in self._view.nodeclaims()
            if claim.spec.node_class_ref.name == name
        ]

    async def reconcile(self, name: str) -> Result:
        """Side effect: one status patch on the NodeClaim when a condition changed."""
        with bind(controller=self.name, nodeclaim=name):
            claim = self._view.nodeclaim(name)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                self._type_checked.pop(name, None)
                return Result()
            pool_name = claim.metadata.labels.get(wk.LABEL_NODEPOOL)
            nodepool = self._view.nodepool(pool_name) if pool_name else None
            if nodepool is None:
                return Result()
            now = self._clock.now()
            drifted, drift_after = await self._drift(nodepool, claim, now)
            updated, consolidate_after = _consolidatable(nodepool, drifted, now)
            if updated.status.conditions is not claim.status.conditions:
                await self._client.patch_status(
                    NODECLAIMS,
                    name,
                    updated.status,
                    previous=claim.status,
                    resource_version=claim.metadata.resource_version,
                )
            waits = [w for w in (drift_after, consolidate_after) if w is not None]
            return Result(requeue_after=min(waits)) if waits else Result()

    async def _drift(
        self, nodepool: NodePool, claim: NodeClaim, now: datetime.datetime
    ) -> tuple[NodeClaim, float | None]:
        conditions = claim.status.conditions
        if not is_true(conditions, ConditionType.LAUNCHED):
            return _with_conditions(
                claim, without_condition(conditions, ConditionType.DRIFTED)
            ), None
        reason = await self._drift_reason(nodepool, claim, now)
        if reason is None:
            if find(conditions, ConditionType.DRIFTED) is not None:
                log.debug("removing drifted status condition, not drifted")
            return _with_conditions(
                claim, without_condition(conditions, ConditionType.DRIFTED)
            ), DRIFT_RECHECK
        if not is_true(conditions, ConditionType.DRIFTED):
            log.info("marking drifted", extra={"reason": reason})
            self._metrics.nodeclaims_drifted_total.add(
                1, {"type": reason, "nodepool": nodepool.metadata.name or ""}
            )
        updated = with_condition(
            conditions, ConditionType.DRIFTED, ConditionStatus.TRUE, reason=reason,
            message=reason, now=now,
        )  # fmt: skip
        return _with_conditions(claim, updated), DRIFT_RECHECK

    async def _drift_reason(
        self, nodepool: NodePool, claim: NodeClaim, now: datetime.datetime
    ) -> str | None:
        reason: str | None = static_drift(_current_hash(nodepool), claim.metadata.annotations)
        if reason is None:
            reason = requirements_drift(nodepool_requirements(nodepool), claim.metadata.labels)
        if reason is None and await self._instance_type_gone(nodepool, claim, now):
            reason = DriftReason.INSTANCE_TYPE_NOT_FOUND
        if reason is None:
            try:
                async with asyncio.timeout(PROVIDER_TIMEOUT):
                    reason = await self._cloud.is_drifted(claim)
            except NodeClaimNotFoundError:
                return None  # garbage collection's business, not drift's
        return reason

    async def _instance_type_gone(
        self, nodepool: NodePool, claim: NodeClaim, now: datetime.datetime
    ) -> bool:
        created = claim.metadata.creation_timestamp
        instance_type = claim.metadata.labels.get(wk.LABEL_INSTANCE_TYPE)
        if created is None or instance_type is None:
            return False
        if (now - created).total_seconds() < INSTANCE_TYPE_CHECK_AGE:
            return False
        name = claim.metadata.name or ""
        tick = self._loop_time() if self._loop_time else asyncio.get_running_loop().time()
        last = self._type_checked.get(name)
        if last is not None and tick - last < INSTANCE_TYPE_CHECK_PERIOD:
            return False
        try:
            async with asyncio.timeout(PROVIDER_TIMEOUT):
                types = await self._cloud.get_instance_types(nodepool)
        except NodeClassNotReadyError:
            return False
        self._type_checked[name] = tick
        return all(t.name != instance_type for t in types)


def _with_conditions(claim: NodeClaim, conditions: tuple[Condition, ...]) -> NodeClaim:
    if conditions is claim.status.conditions:
        return claim
    status = attrs.evolve(claim.status, conditions=conditions)
    return attrs.evolve(claim, status=status)


def _consolidatable(
    nodepool: NodePool, claim: NodeClaim, now: datetime.datetime
) -> tuple[NodeClaim, float | None]:
    """`claim` with Consolidatable set or removed, and seconds until it becomes due."""
    conditions = claim.status.conditions
    after = parse_duration(
        nodepool.spec.disruption.consolidate_after,
        field_name=f"nodepool {nodepool.metadata.name!r} spec.disruption.consolidateAfter",
    )
    initialized = find(conditions, ConditionType.INITIALIZED)
    if after is None or initialized is None or initialized.status is not ConditionStatus.TRUE:
        return _with_conditions(
            claim, without_condition(conditions, ConditionType.CONSOLIDATABLE)
        ), None
    since = claim.status.last_pod_event_time or initialized.last_transition_time
    due = since + after
    if now < due:
        if find(conditions, ConditionType.CONSOLIDATABLE) is not None:
            log.debug("removing consolidatable status condition")
        cleared = without_condition(conditions, ConditionType.CONSOLIDATABLE)
        return _with_conditions(claim, cleared), (due - now).total_seconds()
    if not is_true(conditions, ConditionType.CONSOLIDATABLE):
        log.debug("marking consolidatable")
    updated = with_condition(
        conditions, ConditionType.CONSOLIDATABLE, ConditionStatus.TRUE, reason="Consolidatable",
        now=now,
    )  # fmt: skip
    return _with_conditions(claim, updated), None


def _current_hash(nodepool: NodePool) -> Mapping[str, str]:
    """The NodePool's hash annotations with the hash of its template as it is now, when they are
    of karpy's hash version: a template change is NodePoolDrifted from the first read of it, not
    from when the nodepool.hash controller has written the new hash (until then, a label the
    template added would be the first difference found, as RequirementsDrifted)."""
    annotations = nodepool.metadata.annotations
    if annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION) != HASH_VERSION:
        return annotations
    return {**annotations, wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(nodepool)}
