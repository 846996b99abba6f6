"""The disruption singleton's Emptiness method: delete NodeClaims whose nodes stayed empty for
consolidateAfter, within the NodePools' disruption budgets.

A loop that runs every polling period (10 s, as Karpenter's disruption controller) and whenever
its Trigger fires, once cluster state is synced (deciding from a partial picture could delete a
node whose pods the informer has not shown yet). It reads NodeClaims, Nodes, pods and NodePools
through a ClusterView (never from the apiserver), lets the pure core decide
(karpy.core.disruption.emptiness), and deletes the chosen NodeClaims; the NodeClaim finalizer and
Node termination then drain and remove the node. Only Emptiness is implemented; drift and
consolidation of non-empty nodes are not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar, Final

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import API_VERSION as NODECLAIM_API_VERSION
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.controllers.disruption import inputs
from karpy.core.disruption.emptiness import Candidate, decide
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Event, EventType, InvolvedObject, Recorder
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.channels import Trigger
from karpy.runtime.clock import Clock
from karpy.runtime.options import ReconcileOptions
from karpy.runtime.reconciler import Result, SingletonController, SingletonLoop
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

POLLING_PERIOD: Final = 10.0
"""Seconds between runs (Karpenter's disruption pollingPeriod)."""
NOT_SYNCED_REQUEUE: Final = 1.0
NOMINATION_WINDOW: Final = 20.0
"""Seconds a freshly initialized node is kept for the pods it was launched for: Karpenter's
max(2 x batch max duration, 10 s) with the default 10 s batch max duration."""
REASON_DISRUPTION_TERMINATING: Final = "DisruptionTerminating"


class EmptinessController(SingletonController):
    """Delete empty, consolidatable NodeClaims within budgets; `reconcile_once()` is one pass."""

    name: ClassVar[str] = "disruption.emptiness"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        recorder: Recorder,
        telemetry: Telemetry,
        reconcile: ReconcileOptions,
        trigger: Trigger,
        polling_period: float = POLLING_PERIOD,
        nomination_window: float = NOMINATION_WINDOW,
    ) -> None:
        if polling_period <= 0:
            msg = f"EmptinessController: polling_period must be > 0 seconds, got {polling_period}"
            raise ValueError(msg)
        self._client = client
        self._view = view
        self._clock = clock
        self._recorder = recorder
        self._telemetry = telemetry
        self._period = polling_period
        self._nomination_window = nomination_window
        self._loop = SingletonLoop(
            self.name,
            self.reconcile_once,
            telemetry=telemetry,
            backoff=reconcile.backoff,
            wake=trigger.wait,
        )

    async def reconcile_once(self) -> Result:
        """Delete the NodeClaims emptiness chooses now; always comes back after the period.

        Side effects: DisruptionTerminating events, NodeClaim deletions.
        """
        if not self._view.synced:
            log.debug("waiting on cluster sync")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        claims = self._view.nodeclaims()
        nodes = self._view.nodes()
        pods = self._view.pods()
        nodepools = self._view.nodepools()
        now = self._clock.now().timestamp()
        decision = decide(
            inputs.candidates(
                claims, nodes, pods, now=now, nomination_window=self._nomination_window
            ),
            inputs.pools(nodepools),
            now=now,
        )
        for skip in decision.skipped:
            log.debug(
                "skipping disruption candidate",
                extra={"nodeclaim": skip.nodeclaim, "reason": skip.reason.value},
            )
        by_name = {c.metadata.name or "": c for c in claims}
        for candidate in decision.delete:
            await self._delete(candidate, by_name[candidate.nodeclaim], nodes)
        return Result(requeue_after=self._period)

    async def _delete(self, candidate: Candidate, claim: NodeClaim, nodes: list[Node]) -> None:
        log.info(
            "disrupting node(s)",
            extra={
                "reason": "empty",
                "decision": "delete",
                "nodeclaim": candidate.nodeclaim,
                "node": candidate.node,
                "nodepool": candidate.nodepool,
            },
        )
        now = asyncio.get_running_loop().time()
        message = "Disrupting NodeClaim: Empty"
        await self._recorder.publish(_event(claim, message), now=now)
        node = next((n for n in nodes if n.metadata.name == candidate.node), None)
        if node is not None:
            await self._recorder.publish(_node_event(node, "Disrupting Node: Empty"), now=now)
        try:
            await self._client.delete(NODECLAIMS, candidate.nodeclaim)
        except NotFoundError:
            log.debug("nodeclaim already gone", extra={"nodeclaim": candidate.nodeclaim})
            return
        self._telemetry.metrics.nodeclaims_disrupted_total.add(
            1, {"reason": "empty", "nodepool": candidate.nodepool or ""}
        )
        self._telemetry.metrics.disruption_decisions_total.add(
            1, {"decision": "delete", "reason": "empty", "consolidation_type": ""}
        )


def _event(claim: NodeClaim, message: str) -> Event:
    involved = InvolvedObject(
        api_version=NODECLAIM_API_VERSION,
        kind=NodeClaim.KIND,
        name=claim.metadata.name or "",
        uid=claim.metadata.uid or "",
    )
    return Event(
        involved=involved,
        type=EventType.NORMAL,
        reason=REASON_DISRUPTION_TERMINATING,
        message=message,
    )


def _node_event(node: Node, message: str) -> Event:
    involved = InvolvedObject(
        api_version=Node.API_VERSION,
        kind=Node.KIND,
        name=node.metadata.name or "",
        uid=node.metadata.uid or "",
    )
    return Event(
        involved=involved,
        type=EventType.NORMAL,
        reason=REASON_DISRUPTION_TERMINATING,
        message=message,
    )
