"""Node repair: replace a node whose conditions say it will not recover (Karpenter's node.health
controller, behind the NodeRepair feature gate).

The cloud provider names the conditions (`CloudProvider.repair_policies`: Ready=False or Unknown
for 30 minutes, ...). When a node has matched one for the policy's toleration, its NodeClaim is
stamped with a termination deadline of now (`karpenter.sh/nodeclaim-termination-timestamp`: the
drain deletes pods instead of waiting on evictions an unhealthy node cannot honour) and deleted;
the provisioner launches capacity for its pods as for any others. This is forceful: no
disruption budget applies. A provider may say another controller repairs the node's machine
(`ProviderExtension.repaired_elsewhere`: the Cluster API provider's MachineHealthChecks); then
karpy leaves the node to it, says so in a log line and a `NodeRepairDeferred` event, and looks
again in 5 minutes. Unless too much of the pool is unhealthy: when more than the
threshold (Karpenter's 20 %, an option) of the node's NodePool (of all nodes, for a node without
one) matches a policy at all, the cause is not the node, so nothing is repaired and a
`NodeRepairBlocked` event says why; the node is looked at again in 5 minutes.

Keyed by Node name, fed by Node events; a node within its toleration is requeued for the moment
it runs out. Nodes, NodeClaims and NodePools are read from cluster state.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Sequence
from typing import ClassVar, Final

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.meta import with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.protocol import RepairPolicy
from karpy.controllers.node.health import events
from karpy.core.repair import ConditionState, Policy, repair_allowed, unhealthy
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODES
from karpy.manager import Controller, RepairedElsewhere, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.series import disrupted_labels
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

BLOCKED_RECHECK: Final = 300.0
"""Seconds before a node whose repair the threshold blocked is looked at again."""
DISRUPTED_REASON: Final = "unhealthy"
"""The `reason` label of karpenter_nodeclaims_disrupted_total for a repair (Karpenter's)."""


def policies_with(
    policies: Sequence[RepairPolicy], *, toleration: float | None
) -> tuple[Policy, ...]:
    """The provider's policies as the core's, every toleration replaced by `toleration` when
    given (the KARPY_NODE_REPAIR_TOLERATION option)."""
    return tuple(
        Policy(
            type=p.condition_type,
            status=p.condition_status,
            toleration=toleration if toleration is not None else p.toleration.total_seconds(),
        )
        for p in policies
    )


def condition_states(node: Node) -> list[ConditionState]:
    """The Node's conditions that carry a transition time, as the core reads them."""
    return [
        ConditionState(type=c.type, status=str(c.status), since=c.last_transition_time.timestamp())
        for c in node.status.conditions
        if c.last_transition_time is not None
    ]


class NodeHealthController:
    """Repair one Node (the key) as the module docstring says."""

    name: ClassVar[str] = "node.health"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        policies: Sequence[Policy],
        unhealthy_threshold: str,
        clock: Clock,
        recorder: Recorder,
        telemetry: Telemetry,
        repaired_elsewhere: RepairedElsewhere | None = None,
    ) -> None:
        self._repaired_elsewhere = repaired_elsewhere
        self._client = client
        self._view = view
        self._policies = tuple(policies)
        self._threshold = unhealthy_threshold
        self._clock = clock
        self._recorder = recorder
        self._telemetry = telemetry

    def spec(self) -> Controller:
        """Keyed by Node name, woken by the Node's changes (and its own requeue when a
        condition's toleration runs out)."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(Watch(kind=NODES),),
            reads=CORE_KINDS,
        )

    async def reconcile(self, name: str) -> Result:
        """Side effects: the termination-timestamp annotation and deletion of the node's
        NodeClaim, or a NodeRepairBlocked event."""
        with bind(controller=self.name, node=name):
            node = self._view.node(name)
            if node is None or node.metadata.deletion_timestamp is not None:
                return Result()
            claim = self._nodeclaim_of(node)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                return Result()
            found = unhealthy(condition_states(node), self._policies)
            if found is None:
                return Result()
            now = self._clock.now()
            wait = found.repair_at - now.timestamp()
            if wait > 0:
                return Result(requeue_after=wait)
            if self._repaired_elsewhere is not None:
                owner = await self._repaired_elsewhere(claim)
                if owner is not None:
                    await self._left_to(node, claim, found.condition.type, owner)
                    return Result(requeue_after=BLOCKED_RECHECK)
            pool = node.metadata.labels.get(wk.LABEL_NODEPOOL)
            if not self._pool_healthy(pool):
                await self._blocked(node, pool)
                return Result(requeue_after=BLOCKED_RECHECK)
            await self._repair(node, claim, found.condition.type, now)
            return Result()

    def _nodeclaim_of(self, node: Node) -> NodeClaim | None:
        provider_id = node.spec.provider_id
        if not provider_id:
            return None
        return next(iter(self._view.nodeclaims_with_provider_id(provider_id)), None)

    def _pool_healthy(self, pool: str | None) -> bool:
        nodes = [
            n
            for n in self._view.nodes()
            if pool is None or n.metadata.labels.get(wk.LABEL_NODEPOOL) == pool
        ]
        sick = sum(1 for n in nodes if unhealthy(condition_states(n), self._policies) is not None)
        return repair_allowed(unhealthy_count=sick, total=len(nodes), threshold=self._threshold)

    async def _blocked(self, node: Node, pool: str | None) -> None:
        scope = f"nodepool {pool!r}" if pool else "the cluster"
        log.info(
            "node repair blocked", extra={"nodepool": pool or "", "threshold": self._threshold}
        )
        await self._recorder.publish(
            events.repair_blocked(node, self._threshold, scope),
            now=asyncio.get_running_loop().time(),
        )

    async def _left_to(self, node: Node, claim: NodeClaim, condition: str, owner: str) -> None:
        log.info(
            "node repair left to another controller",
            extra={"nodeclaim": claim.metadata.name, "condition": condition, "owner": owner},
        )
        await self._recorder.publish(
            events.repaired_elsewhere(node, condition, owner),
            now=asyncio.get_running_loop().time(),
        )

    async def _repair(
        self, node: Node, claim: NodeClaim, condition: str, now: datetime.datetime
    ) -> None:
        name = claim.metadata.name or ""
        stamp = now.astimezone(datetime.UTC).replace(microsecond=0).isoformat()
        stamp = stamp.replace("+00:00", "Z")
        try:
            if wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP not in claim.metadata.annotations:
                annotations = {wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: stamp}
                stamped = attrs.evolve(
                    claim, metadata=with_annotations(claim.metadata, annotations)
                )
                await self._client.patch(NODECLAIMS, claim, stamped)
            await self._client.delete(NODECLAIMS, name)
        except NotFoundError:
            return
        pool = node.metadata.labels.get(wk.LABEL_NODEPOOL, "")
        log.info("deleting unhealthy node", extra={"nodeclaim": name, "condition": condition})
        metrics = self._telemetry.metrics
        metrics.nodeclaims_disrupted_total.add(1, disrupted_labels(claim, DISRUPTED_REASON))
        metrics.upkeep.nodeclaims_unhealthy_disrupted_total.add(
            1, {"condition": condition, "nodepool": pool}
        )
        await self._recorder.publish(
            events.unhealthy_terminating(claim, condition), now=asyncio.get_running_loop().time()
        )
