"""Relabel nodes whose capacity reservation ended: ``reserved`` becomes ``on-demand``.

When an on-demand capacity reservation expires or is cancelled, EC2 leaves its instances
running, billed from then on as plain on-demand. Karpenter's AWS provider follows EC2: once a
minute it finds the NodeClaims labelled ``karpenter.sh/capacity-type: reserved`` whose instance
is no longer in a reservation, and patches their capacity type to ``on-demand`` and removes the
reservation labels, on the NodeClaim and on its registered Node. The node keeps running; it is
not drifted or replaced for it (an instance that could run on was never the problem), and from
then on consolidation prices it, and scheduling counts it, as the on-demand node it has become.
karpy does the same. It tells an ended reservation from one the EC2NodeClass merely stopped
selecting (which drifts, ``CapacityReservationDrift``) by asking EC2 which reservations are
still active (one DescribeCapacityReservations a pass, shared with the launch path's record of
each reservation's room through ReservationAvailability).

Deciding is pure (``relabelled``); the controller only reads from the view and patches.
A NodeClaim being deleted is left as it is (it is draining anyway); a Node not yet registered
is skipped until it is (its labels may still be synced from the NodeClaim).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import ClassVar, Final

import attrs

from karpy.apis.meta import ObjectMeta, with_labels
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.manager import Singleton
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.capacityreservations import ReservationAvailability

PERIOD: Final = 60.0
"""Seconds between passes (Karpenter's controller runs once a minute)."""
CALL_TIMEOUT: Final = 60.0
"""Deadline in seconds for the pass's DescribeCapacityReservations."""
RESERVATION_LABELS: Final = (
    awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID,
    awslabels.LABEL_AWS_CAPACITY_RESERVATION_TYPE,
    awslabels.LABEL_AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
)

log = logging.getLogger(__name__)


def reserved_in(claim: NodeClaim) -> str | None:
    """The reservation ``claim`` was launched into, when it is still labelled ``reserved`` and
    not being deleted (pure)."""
    labels = claim.metadata.labels
    if claim.metadata.deletion_timestamp is not None:
        return None
    if labels.get(wk.LABEL_CAPACITY_TYPE) != wk.CAPACITY_TYPE_RESERVED:
        return None
    return labels.get(awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID)


def relabelled(metadata: ObjectMeta) -> ObjectMeta:
    """``metadata`` with capacity type ``on-demand`` and no reservation labels (pure)."""
    changes: Mapping[str, str | None] = {
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND,
        **dict.fromkeys(RESERVATION_LABELS),
    }
    return with_labels(metadata, changes)


class CapacityTypeController:
    """Once a minute, move NodeClaims and Nodes of ended reservations to ``on-demand``."""

    name: ClassVar[str] = "capacityreservation.capacitytype"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        reservations: ReservationAvailability,
        *,
        period: float = PERIOD,
    ) -> None:
        self._kube = kube
        self._view = view
        self._reservations = reservations
        self._period = period

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run (on the leader)."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass, then the next a period later. Raises AWSError or KubeError when EC2 or
        the apiserver fails (the runner backs off)."""
        await self.act()
        return Result(requeue_after=self._period)

    async def act(self) -> tuple[str, ...]:
        """One pass: the names of the NodeClaims relabelled ``on-demand``."""
        reserved = {
            claim.metadata.name or "": (claim, reservation)
            for claim in self._view.nodeclaims()
            if (reservation := reserved_in(claim)) is not None
        }
        if not reserved:
            return ()
        async with asyncio.timeout(CALL_TIMEOUT):
            await self._reservations.refresh(
                {reservation for _, reservation in reserved.values()}, force=True
            )
        done: list[str] = []
        for name, (claim, reservation) in sorted(reserved.items()):
            if not self._reservations.ended(reservation):
                continue
            try:
                await self._kube.patch(
                    NODECLAIMS, claim, attrs.evolve(claim, metadata=relabelled(claim.metadata))
                )
            except NotFoundError:
                continue
            nodes = await self._relabel_nodes(claim)
            log.info(
                "capacity reservation ended; nodeclaim is on-demand now",
                extra={"nodeclaim": name, "reservation": reservation, "nodes": nodes},
            )
            done.append(name)
        return tuple(done)

    async def _relabel_nodes(self, claim: NodeClaim) -> list[str]:
        """Relabel the registered Nodes of ``claim`` still labelled ``reserved``."""
        provider_id = claim.status.provider_id
        if not provider_id:
            return []
        out = []
        for node in self._view.nodes_with_provider_id(provider_id):
            labels = node.metadata.labels
            if (
                node.metadata.deletion_timestamp is not None
                or labels.get(wk.LABEL_NODE_REGISTERED) != "true"
                or labels.get(wk.LABEL_CAPACITY_TYPE) != wk.CAPACITY_TYPE_RESERVED
            ):
                continue
            try:
                await self._kube.patch(
                    NODES, node, attrs.evolve(node, metadata=relabelled(node.metadata))
                )
            except NotFoundError:
                continue
            out.append(node.metadata.name or "")
        return out
