"""Leaked-instance garbage collection, the leader's periodic AWS chore.

Declared as a `karpy.manager.Singleton` (one pass, then ``Result(requeue_after=period)``),
which the operator's manager runs with its other controllers, so each pass gets a span, a
failure is logged and retried with backoff, and shutdown drains it. The period runs on the loop
clock; the 30 s leak grace reads the injected wall clock.
The provider's own upkeep is `karpy_aws.cloudprovider.maintenance`.

* :class:`LeakedInstanceController` terminates instances tagged for the cluster that no
  NodeClaim stands for (older than 30 s) every two minutes, as Karpenter's
  ``instance.garbagecollection`` does, and deletes the Node such an instance had registered.
  NodeClaims and Nodes are read from the operator's cluster view, not listed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar, Final

from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODES
from karpy.manager import Singleton
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_aws.controllers.garbagecollection import LEAK_GRACE_PERIOD, collect_leaked_instances
from karpy_aws.providers.instance import Instances

LEAK_PERIOD: Final = 120.0
"""Seconds between leaked-instance passes (Karpenter's two minutes)."""
LEAK_TIMEOUT: Final = 300.0
"""Deadline in seconds for one leaked-instance pass."""

log = logging.getLogger(__name__)


def _positive(owner: str, period: float) -> float:
    if period <= 0:
        msg = f"{owner}: period must be > 0 seconds, got {period}"
        raise ValueError(msg)
    return period


class LeakedInstanceController:
    """Terminate the cluster's instances no NodeClaim holds, and delete their Nodes."""

    name: ClassVar[str] = "instance.garbagecollection"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        instances: Instances,
        *,
        clock: Clock,
        period: float = LEAK_PERIOD,
    ) -> None:
        self._period = _positive(type(self).__name__, period)
        self._kube = kube
        self._view = view
        self._instances = instances
        self._clock = clock

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass: terminate leaked instances (collect_leaked_instances logs each one) and
        delete their Nodes. NodeClaims are read before the instances are listed, so an instance
        launched between the two is younger than the grace period and never judged against a
        stale read.
        """
        cutoff = self._clock.now() - LEAK_GRACE_PERIOD
        stale = [
            c.metadata.name
            for c in self._view.launching()
            if c.metadata.creation_timestamp is not None and c.metadata.creation_timestamp < cutoff
        ]
        if stale:
            # A NodeClaim older than the grace period is still launching: karpy restarted
            # mid-launch, and its retried CreateFleet (same client token) is about to claim the
            # instance already made. Terminating that instance now would hand the NodeClaim a
            # dead one; wait for the launch to resolve.
            log.debug("waiting on launches", extra={"nodeclaims": sorted(n or "" for n in stale)})
            return Result(requeue_after=self._period)
        async with asyncio.timeout(LEAK_TIMEOUT):
            held = {c.status.provider_id for c in self._view.nodeclaims() if c.status.provider_id}
            collected = set(
                await collect_leaked_instances(self._instances, held, clock=self._clock)
            )
            if collected:
                await self._delete_nodes(collected)
        return Result(requeue_after=self._period)

    async def _delete_nodes(self, provider_ids: set[str]) -> None:
        for provider_id in sorted(provider_ids):
            for node in self._view.nodes_with_provider_id(provider_id):
                name = node.metadata.name or ""
                try:
                    await self._kube.delete(NODES, name)
                except NotFoundError:
                    continue
                log.info("garbage collected node", extra={"node": name, "provider_id": provider_id})
