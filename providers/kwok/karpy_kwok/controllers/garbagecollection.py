"""Garbage collection of leaked kwok instances, as Karpenter's does for EC2 instances.

A kwok Node that no NodeClaim owns (its NodeClaim was deleted before the launch was recorded,
say) is deleted once it is older than LEAK_GRACE seconds; the pass runs at start, every
LEAK_PERIOD seconds, and when the grace of an instance it saw runs out. A NodeClaim being deleted
before its launch was recorded has its Node deleted by the cloud provider's ``delete`` instead.
"""

from __future__ import annotations

import logging
from typing import Final

from karpy.apis.kube.node import Node
from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_kwok.controllers.launches import RETRY_SECONDS
from karpy_kwok.providers.instance import KwokInstances
from karpy_kwok.providers.nodes import is_ours, owns

log = logging.getLogger(__name__)

LEAK_GRACE: Final = 30.0
"""Seconds a kwok Node may exist without a NodeClaim before it is collected (Karpenter's 30 s
for EC2 instances: the NodeClaim of a launch in progress may not show yet)."""
LEAK_PERIOD: Final = 120.0
"""Seconds between leaked-instance passes (Karpenter's two minutes)."""
NOT_SYNCED_REQUEUE: Final = 1.0


class LeakedNodeController:
    """Deletes the kwok Nodes of `instances` that no NodeClaim in `view` owns."""

    def __init__(
        self, kube: KubeClient, view: ClusterView | None, instances: KwokInstances, *, clock: Clock
    ) -> None:
        self._kube = kube
        self._view = view
        self._instances = instances
        self._clock = clock

    async def reconcile_once(self) -> Result:
        """Delete the kwok Nodes no NodeClaim owns that are older than LEAK_GRACE; come back
        after LEAK_PERIOD, or sooner when a Node seen here will be past its grace.

        Owned: a NodeClaim holds the Node's providerID, or a NodeClaim of the Node's name (a
        launch not recorded yet, whose retry claims it) has the UID the Node was launched for.
        NodeClaims are read (from cluster state) before the Nodes, so a Node launched between
        the two is younger than the grace. The view may lag the apiserver, so a Node about to
        be collected is checked once more against the NodeClaim of its name on the apiserver.
        Each collected Node is logged; the termination controller drains one that registered.
        """
        if self._view is None:
            return Result()  # built without cluster state (tests): no NodeClaims to judge by
        if not self._view.informers_synced:
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        claims = self._view.nodeclaims()
        held = {c.status.provider_id for c in claims if c.status.provider_id}
        named = {c.metadata.name: c.metadata.uid for c in claims if c.metadata.name}
        now = self._clock.now()
        again = LEAK_PERIOD
        for node in await self._instances.read_all():
            name = node.metadata.name or ""
            if (
                not is_ours(node)
                or node.metadata.deletion_timestamp is not None
                or node.spec.provider_id in held
                or owns(named.get(name), node)
            ):
                continue
            created = node.metadata.creation_timestamp
            age = (now - created).total_seconds() if created is not None else 0.0
            if age < LEAK_GRACE:
                again = min(again, LEAK_GRACE - age + RETRY_SECONDS)
                continue
            if await self._owned_on_apiserver(node):
                continue
            self._instances.drop(name)
            try:
                await self._instances.delete(name)
            except NotFoundError:
                continue
            log.info(
                "garbage collected kwok instance",
                extra={
                    "node": name,
                    "provider_id": node.spec.provider_id,
                    "nodepool": node.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
                },
            )
        return Result(requeue_after=again)

    async def _owned_on_apiserver(self, node: Node) -> bool:
        """Whether the apiserver has a NodeClaim that owns `node` (see `reconcile_once`)."""
        try:
            claim = await self._kube.get(NODECLAIMS, node.metadata.name or "")
        except NotFoundError:
            return False
        return claim.status.provider_id == node.spec.provider_id or owns(claim.metadata.uid, node)
