"""Delete NodeClaims whose instance vanished behind karpy's back.

An instance can be terminated outside karpy (a console click, a spot reclaim karpy missed, a
provider-side cleanup). Its NodeClaim would then wait forever for a Node that is gone or never
becomes Ready again. Every two minutes (and once at start) this loop lists the provider's
instances and deletes each launched NodeClaim (it has a providerID, and its Launched condition
turned True more than the grace period ago) that the provider no longer lists and whose Node is
missing or not Ready. Deleting the NodeClaim hands it to the lifecycle finalizer, which cleans
up the Node. A NodeClaim that is not yet Launched belongs to the lifecycle's launch timeout,
not to this loop.

NodeClaims and Nodes are read from cluster state through a `ClusterView`, not listed from the
apiserver each pass; only the provider's instances are listed (from the cloud). A pass waits
until cluster state is synced (before that a Node may simply not be listed yet). The view may lag
the apiserver by a few watch events, which cannot make a live instance's NodeClaim collectable:
the NodeClaims are read before the instances are listed, so the instance of every NodeClaim the
view shows Launched was created before the cloud's list began, and the grace period after Launched
still covers a provider whose list lags its own creates; a NodeClaim created or launched after
the read waits for the next pass; one the view still shows after its deletion costs one delete
that answers NotFound. This loop deletes NodeClaims, never instances, so an instance whose
NodeClaim the view has not caught up with is not at risk from it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import ClassVar, Final

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.nodeclaim.lifecycle.nodes import node_ready
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.manager import Singleton
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.conditions import get_condition
from karpy.state.series import disrupted_labels
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

PERIOD: Final = 120.0
"""Seconds between passes (Karpenter's two minutes)."""

GRACE_PERIOD: Final = 10.0
"""Seconds after launch before a NodeClaim may be collected: the provider's list may lag."""

NOT_SYNCED_REQUEUE: Final = 1.0
"""Seconds before a pass that found cluster state unsynced is tried again."""

PROVIDER_TIMEOUT: Final = 60.0
"""Seconds allowed for one `CloudProvider.list()` call."""


def collectable(
    claim: NodeClaim,
    *,
    listed: frozenset[str],
    nodes: dict[str, Node],
    now: datetime.datetime,
    grace_period: float = GRACE_PERIOD,
) -> bool:
    """Whether `claim` has no provider instance (`listed` provider IDs) and no Ready Node
    (`nodes` by provider ID), and launched more than `grace_period` seconds before `now`."""
    provider_id = claim.status.provider_id
    if not provider_id or claim.metadata.deletion_timestamp is not None:
        return False
    launched = get_condition(claim, ConditionType.LAUNCHED)
    if launched is None or launched.status is not ConditionStatus.TRUE:
        return False
    if (now - launched.last_transition_time).total_seconds() <= grace_period:
        return False
    if provider_id in listed:
        return False
    node = nodes.get(provider_id)
    return node is None or not node_ready(node)


class GarbageCollectionController:
    """Delete NodeClaims with no cloud provider representation; `reconcile_once()` is one pass."""

    name: ClassVar[str] = "nodeclaim.garbagecollection"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        cloudprovider: CloudProvider,
        *,
        clock: Clock,
        telemetry: Telemetry,
        period: float = PERIOD,
        grace_period: float = GRACE_PERIOD,
    ) -> None:
        if period <= 0:
            msg = f"GarbageCollectionController: period must be > 0 seconds, got {period}"
            raise ValueError(msg)
        if grace_period < 0:
            msg = (
                "GarbageCollectionController: grace_period must be >= 0 seconds,"
                f" got {grace_period}"
            )
            raise ValueError(msg)
        self._client = client
        self._view = view
        self._cloudprovider = cloudprovider
        self._telemetry = telemetry
        self._clock = clock
        self._period = period
        self._grace_period = grace_period

    def spec(self) -> Singleton:
        """A pass at start, then one each period (the pass asks for it)."""
        return Singleton(
            name=self.name, reconcile=self.reconcile_once, reads=(NODES, PODS, NODECLAIMS)
        )

    async def reconcile_once(self) -> Result:
        """Delete every collectable NodeClaim; always comes back after the period.

        The NodeClaims are read (from cluster state) before the instances are listed, so a
        NodeClaim launched between the two is never judged against a list that could not
        contain it.
        """
        # Launched NodeClaims are judged only; one still launching does not hold collection.
        if not self._view.informers_synced:
            log.debug("waiting on cluster sync")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        claims = self._view.nodeclaims()
        async with asyncio.timeout(PROVIDER_TIMEOUT):
            instances = await self._cloudprovider.list()
        listed = frozenset(i.status.provider_id for i in instances if i.status.provider_id)
        nodes = {n.spec.provider_id: n for n in self._view.nodes() if n.spec.provider_id}
        now = self._clock.now()
        for claim in claims:
            if not collectable(
                claim, listed=listed, nodes=nodes, now=now, grace_period=self._grace_period
            ):
                continue
            name = claim.metadata.name or ""
            try:
                await self._client.delete(NODECLAIMS, name)
            except NotFoundError:
                continue
            nodepool = claim.metadata.labels.get(wk.LABEL_NODEPOOL, "")
            self._telemetry.metrics.nodeclaims_disrupted_total.add(
                1, disrupted_labels(claim, "garbage_collected")
            )
            log.info(
                "garbage collecting nodeclaim with no cloudprovider representation",
                extra={
                    "nodeclaim": name,
                    "provider-id": claim.status.provider_id,
                    "nodepool": nodepool,
                },
            )
        return Result(requeue_after=self._period)
