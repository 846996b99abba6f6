"""Keep each NodeClaim's `status.lastPodEventTime` current: the time a pod was last bound to, or
removed from, its node. It is what consolidateAfter is measured from.

Which pod events are a bind or a removal is `karpy.state.pods.pod_moves` (the disruption pass
is woken by the same moves). Each one queues the node's name;
the reconcile finds the node's NodeClaim in cluster state (by status.nodeName, so it is found even
once the Node itself is gone) and stamps it with `Clock.now()` unless the stored stamp is less
than the dedupe window old (10 s, as Karpenter), which keeps a busy node from causing a write per
pod.
"""

from __future__ import annotations

import logging
from typing import ClassVar, Final

from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimStatus
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.manager import PARALLEL_WORKERS, Controller, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.podmoves import pod_moves
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

DEDUPE_WINDOW: Final = 10.0
"""Seconds within which a NodeClaim's lastPodEventTime is not rewritten (Karpenter's dedupe)."""


def nodeclaim_of(node: str, view: ClusterView) -> NodeClaim | None:
    """The NodeClaim whose registered node is `node`."""
    return next(iter(view.nodeclaims_on(node)), None)


class PodEventsController:
    """Stamp `status.lastPodEventTime` on the NodeClaim of a node (the work-queue key)."""

    name: ClassVar[str] = "nodeclaim.podevents"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        dedupe_window: float = DEDUPE_WINDOW,
    ) -> None:
        self._client = client
        self._view = view
        self._clock = clock
        self._window = dedupe_window

    def spec(self) -> Controller:
        """Keyed by Node name, woken by a pod bound to or removed from the node."""
        return Controller(
            name=self.name,
            reconcile=self.reconcile,
            watches=(Watch(kind=PODS, keys=pod_moves(lambda: self._view.informers_synced)),),
            reads=(NODES, NODECLAIMS, NODEPOOLS),
            workers=PARALLEL_WORKERS,
            done_on=(NotFoundError,),
        )

    async def reconcile(self, node: str) -> Result:
        """Side effect: one status merge patch on the node's NodeClaim, unless deduplicated."""
        claim = nodeclaim_of(node, self._view)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return Result()
        now = self._clock.now()
        last = claim.status.last_pod_event_time
        if last is not None and (now - last).total_seconds() < self._window:
            return Result()
        name = claim.metadata.name or ""
        stamp = NodeClaimStatus(last_pod_event_time=now.replace(microsecond=0))
        await self._client.patch_status(NODECLAIMS, name, stamp)
        log.debug("updated last pod event time", extra={"nodeclaim": name, "node": node})
        return Result()
