"""Keep each NodeClaim's `status.lastPodEventTime` current: the time a pod was last bound to, or
removed from, its node. It is what consolidateAfter is measured from.

Informer events carry only the new object, so the subscriber remembers which pods it has seen
running on which node: a pod newly seen bound is a bind, a known pod that finished, started
terminating or was deleted is a removal. Pods listed before cluster state is synced are only
remembered (the initial list is not an event on the node). Each event queues the node's name;
the reconcile finds the node's NodeClaim in cluster state (by status.nodeName, so it is found even
once the Node itself is gone) and stamps it with `Clock.now()` unless the stored stamp is less
than the dedupe window old (10 s, as Karpenter), which keeps a busy node from causing a write per
pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar, Final

from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimStatus
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.kube.watch import Event, EventType
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.informers import Subscriber
from karpy.state.pods import is_terminal, is_terminating
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

DEDUPE_WINDOW: Final = 10.0
"""Seconds within which a NodeClaim's lastPodEventTime is not rewritten (Karpenter's dedupe)."""


def _active(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and not is_terminal(pod) and not is_terminating(pod)


def pod_subscriber(enqueue: Callable[[str], None], view: ClusterView) -> Subscriber[Pod]:
    """Queue the node a pod was bound to or removed from (see the module docstring)."""
    placed: dict[str, str] = {}

    def on_event(event: Event[Pod]) -> None:
        pod = event.item.obj
        uid = event.item.ref.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
        known = placed.get(uid)
        if event.type is not EventType.DELETED and _active(pod):
            node = pod.spec.node_name or ""
            placed[uid] = node
            changed = known != node
        else:
            placed.pop(uid, None)
            node = known or ""
            changed = known is not None
        if changed and node and view.informers_synced:
            enqueue(node)

    return on_event


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
