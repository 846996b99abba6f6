"""Check that a NodeClaim and its Node still agree (Karpenter's nodeclaim.consistency controller).

The scheduler and consolidation plan with the capacity a NodeClaim was launched for
(`status.capacity`, from the instance type). When the Node that joined is much smaller (a
misreported instance type, memory reserved by a driver, a GPU the plugin does not expose) every
plan made from the NodeClaim is wrong, and nothing else would say so. Likewise a deleting
NodeClaim whose Node cannot drain because a PodDisruptionBudget allows no eviction just looks
stuck. Every ten minutes, per NodeClaim, this controller runs Karpenter's checks:

* node shape: for an initialized NodeClaim, each resource it requested of which the Node's
  capacity is below 90 % of the NodeClaim's expected capacity is an issue, "expected 16Gi of
  resource memory, but found 8Gi (50.0% of expected)";
* termination: for a deleting NodeClaim, a PDB that allows no disruption and covers a pod on
  its Node is an issue, "can't drain node, PDB "ns/name" is blocking evictions".

Each issue is logged (`consistency error`) and published as a `FailedConsistencyCheck` Warning
on the NodeClaim; `ConsistentStateFound` becomes False (reason `ConsistencyCheckFailed`), or True
when a check finds nothing. The condition is informational: it is not part of the NodeClaim's
Ready and nothing acts on it.

Keyed by NodeClaim name, woken by its own events and its Node's (through the lifecycle's
providerID index); a NodeClaim checked less than a period ago waits out the rest of it, so a
Node's heartbeats cost a dictionary lookup. A NodeClaim without a providerID, or with no Node or
several Nodes for it, is not checked (the lifecycle reports those).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import ClassVar, Final

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus, Quantity
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.controllers.nodeclaim import events
from karpy.controllers.nodeclaim.lifecycle.watches import claims_of_node
from karpy.core.resources import parse_quantity
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODES, PODDISRUPTIONBUDGETS
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.state.conditions import claim_is_true, set_condition
from karpy.state.pods import is_terminating, needs_drain
from karpy.state.protection import Budgets
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

SCAN_PERIOD: Final = datetime.timedelta(minutes=10)
"""How often each NodeClaim is checked (Karpenter's scanPeriod)."""

SHAPE_THRESHOLD: Final = 0.90
"""A Node with less than this share of an expected resource is inconsistent (Karpenter's)."""

REASON_CONSISTENT: Final = "ConsistentStateFound"
REASON_FAILED: Final = "ConsistencyCheckFailed"
MESSAGE_FAILED: Final = "Consistency Check Failed"


def node_shape_issues(nodeclaim: NodeClaim, node: Node) -> list[str]:
    """Karpenter's node-shape check: the resources the NodeClaim requested of which the Node
    reports under 90 % of the expected capacity. Deleting and uninitialized NodeClaims have
    none (their Node may still be filling in its capacity). Pure."""
    if nodeclaim.metadata.deletion_timestamp is not None:
        return []
    if not claim_is_true(nodeclaim, ConditionType.INITIALIZED):
        return []
    issues: list[str] = []
    for resource in sorted(nodeclaim.spec.resources.requests):
        requested = _amount(nodeclaim.spec.resources.requests, resource)
        expected = _amount(nodeclaim.status.capacity, resource)
        if requested == 0 or expected == 0:
            continue
        found = _amount(node.status.capacity, resource)
        share = found / expected
        if share < SHAPE_THRESHOLD:
            issues.append(
                f"expected {nodeclaim.status.capacity[resource]} of resource {resource}, but "
                f"found {node.status.capacity.get(resource, '0')} ({share * 100:.1f}% of expected)"
            )
    return issues


def _amount(quantities: Mapping[str, Quantity], resource: str) -> float:
    value = quantities.get(resource)
    return 0.0 if value is None else float(parse_quantity(str(value)))


class ConsistencyController:
    """Run the consistency checks (the module docstring); keyed by NodeClaim name.

    Args:
        scan_period: how long a checked NodeClaim waits before it is checked again (Karpenter's
            ten minutes; shorter for tests).
    """

    name: ClassVar[str] = "nodeclaim.consistency"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        recorder: Recorder,
        scan_period: datetime.timedelta = SCAN_PERIOD,
    ) -> None:
        self._client = client
        self._view = view
        self._clock = clock
        self._recorder = recorder
        self._period = scan_period
        # When each NodeClaim (by UID) was last checked; the oldest forgotten past the limit.
        self._scanned: OrderedDict[str, datetime.datetime] = OrderedDict()

    def spec(self) -> Controller:
        """Keyed by NodeClaim name: its own changes and its Node's."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=NODECLAIMS),
                Watch(kind=NODES, keys=claims_of_node(self._view)),
            ),
            reads=(*CORE_KINDS, PODDISRUPTIONBUDGETS),
        )

    async def reconcile(self, name: str) -> Result:
        """Side effects: a FailedConsistencyCheck event per issue, and a status patch when
        ConsistentStateFound changes. Requeues itself for the next check."""
        with bind(controller=self.name, nodeclaim=name):
            nodeclaim = self._view.nodeclaim(name)
            if nodeclaim is None or not nodeclaim.status.provider_id:
                return Result()
            uid = nodeclaim.metadata.uid or name
            now = self._clock.now()
            last = self._scanned.get(uid)
            if last is not None and now - last < self._period:
                return Result(requeue_after=(self._period - (now - last)).total_seconds())
            nodes = self._view.nodes_with_provider_id(nodeclaim.status.provider_id)
            if len(nodes) != 1:
                return Result()
            node = nodes[0]
            issues = [
                *self._termination_issues(nodeclaim, node),
                *node_shape_issues(nodeclaim, node),
            ]
            for issue in issues:
                log.error("consistency error", extra={"error": issue, "node": node.metadata.name})
                await self._recorder.publish(
                    events.failed_consistency_check(nodeclaim, issue),
                    now=asyncio.get_running_loop().time(),
                )
            if issues:
                checked = set_condition(
                    nodeclaim,
                    ConditionType.CONSISTENT_STATE_FOUND,
                    ConditionStatus.FALSE,
                    reason=REASON_FAILED,
                    message=MESSAGE_FAILED,
                    now=now,
                )
            elif not claim_is_true(nodeclaim, ConditionType.CONSISTENT_STATE_FOUND):
                checked = set_condition(
                    nodeclaim,
                    ConditionType.CONSISTENT_STATE_FOUND,
                    ConditionStatus.TRUE,
                    reason=REASON_CONSISTENT,
                    now=now,
                )
            else:
                checked = nodeclaim
            if checked is not nodeclaim:
                await self._client.patch_status(
                    NODECLAIMS,
                    name,
                    checked.status,
                    previous=nodeclaim.status,
                    resource_version=nodeclaim.metadata.resource_version,
                )
            self._remember(uid, now)
            return Result(requeue_after=self._period.total_seconds())

    def _termination_issues(self, nodeclaim: NodeClaim, node: Node) -> list[str]:
        """Karpenter's termination check: a PDB that blocks the drain of a deleting NodeClaim's
        Node (the first one found)."""
        if nodeclaim.metadata.deletion_timestamp is None:
            return []
        budgets = Budgets(self._view.objects(PODDISRUPTIONBUDGETS))
        for pod in self._view.pods_on(node.metadata.name or ""):
            if not needs_drain(pod) or is_terminating(pod):
                continue
            blocking = budgets.blocking(pod.metadata.namespace or "", pod.metadata.labels)
            if blocking is not None:
                return [f'can\'t drain node, PDB "{blocking}" is blocking evictions']
        return []

    def _remember(self, uid: str, now: datetime.datetime) -> None:
        self._scanned[uid] = now
        self._scanned.move_to_end(uid)
        while len(self._scanned) > _SCANNED_LIMIT:
            self._scanned.popitem(last=False)


_SCANNED_LIMIT: Final = 100_000
"""NodeClaims remembered as checked; far above any cluster's count, so only the long gone go."""
