"""The ``clusterapi.garbagecollection`` pass: Machines karpy claimed that no NodeClaim owns any
more are removed, and scale-up records whose NodeClaim is gone give their replica back.

A claimed Machine is owned while a NodeClaim of its label's name exists with the UID it was
claimed for. Leaks come from NodeClaims deleted behind karpy's back (their finalizer stripped) or
from a crash between a claim and the NodeClaim's record of it. Every read is from informers: the
NodeClaims from the cluster state the provider was given (a provider built outside the operator
informs them itself), read before the Machines, which come from the management cluster's
informers; a pass asks the apiserver for nothing and writes only what it collects. A Machine or
record younger than the grace is left for the next pass: the create that made it may still be
recording it. Records of releases whose Machine is gone are dropped here too.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

from karpy.kube.kinds import NODECLAIMS
from karpy.manager import Result, Singleton
from karpy.runtime.clock import Clock
from karpy.state.view import ClusterView
from karpy_clusterapi.providers.machines import Fleet

log = logging.getLogger(__name__)

NAME: Final = "clusterapi.garbagecollection"
GRACE: Final = 30.0
"""Seconds a claimed Machine or a scale-up record may go unowned before it is collected."""
PERIOD: Final = 120.0
"""Seconds between passes (Karpenter's two minutes)."""
NOT_SYNCED_REQUEUE: Final = 1.0


class GarbageCollector:
    def __init__(self, view: ClusterView, fleet: Fleet, *, clock: Clock) -> None:
        """`view` informs NodeClaims (the operator's cluster state, or informers of the
        provider's own)."""
        self._view = view
        self._fleet = fleet
        self._clock = clock

    async def reconcile_once(self) -> Result:
        """Collect what no NodeClaim owns (see the module docstring); come back after PERIOD."""
        if not self._view.informers_synced:
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        owners = {c.metadata.uid for c in self._view.nodeclaims() if c.metadata.uid}
        now = self._clock.now()
        machines = await self._fleet.machines()
        for machine in machines:
            if machine.claimed_by is None or machine.claimed_by in owners or machine.deleting:
                continue
            if _younger(machine.created, now):
                continue
            await self._fleet.release(machine)
            log.info(
                "garbage collected clusterapi machine",
                extra={
                    "machine": machine.key,
                    "nodeclaim": machine.labels.get("karpenter.cluster.x-k8s.io/nodeclaim", ""),
                    "provider_id": machine.provider_id,
                },
            )
        alive = {m.uid for m in machines}
        for md in await self._fleet.deployments():
            for uid, when in md.scale_ups().items():
                if uid in owners or _younger(_parse(when), now):
                    continue
                shrunk = await self._fleet.shrink_unclaimed(md, nodeclaim_uid=uid)
                log.info(
                    "garbage collected clusterapi scale-up",
                    extra={"machinedeployment": md.key, "nodeclaim_uid": uid},
                )
                if shrunk is None:
                    break
                md = shrunk
            gone = [uid for uid in md.releases() if uid not in alive]
            await self._fleet.forget_releases(md, gone)
        return Result(requeue_after=PERIOD)

    def spec(self) -> Singleton:
        return Singleton(name=NAME, reconcile=self.reconcile_once, reads=(NODECLAIMS,))


def _younger(created: datetime | None, now: datetime) -> bool:
    return created is None or (now - created).total_seconds() < GRACE


def _parse(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
