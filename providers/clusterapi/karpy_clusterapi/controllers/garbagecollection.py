"""The ``clusterapi.garbagecollection`` pass: Machines karpy claimed that no NodeClaim owns any
more are removed, and scale-up records whose NodeClaim is gone give their replica back.

A claimed Machine is owned while a NodeClaim of its label's name exists with the UID it was
claimed for. Leaks come from NodeClaims deleted behind karpy's back (their finalizer stripped) or
from a crash between a claim and the NodeClaim's record of it. NodeClaims are read (from cluster
state, or the apiserver for a provider built outside the operator) before the Machines, and a
Machine or record younger than the grace is left for the next pass: the create that made it may
still be recording it. Records of releases whose Machine is gone are dropped here too.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.manager import Result
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
    def __init__(
        self, kube: KubeClient, view: ClusterView | None, fleet: Fleet, *, clock: Clock
    ) -> None:
        self._kube = kube
        self._view = view
        self._fleet = fleet
        self._clock = clock

    async def _nodeclaims(self) -> list[NodeClaim] | None:
        if self._view is not None:
            if not self._view.informers_synced:
                return None
            return list(self._view.nodeclaims())
        listed = await self._kube.list(NODECLAIMS)
        return [item.obj for item in listed.items]

    async def reconcile_once(self) -> Result:
        """Collect what no NodeClaim owns (see the module docstring); come back after PERIOD."""
        claims = await self._nodeclaims()
        if claims is None:
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        owners = {c.metadata.uid for c in claims if c.metadata.uid}
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
                await self._fleet.shrink_unclaimed(md, nodeclaim_uid=uid)
                log.info(
                    "garbage collected clusterapi scale-up",
                    extra={"machinedeployment": md.key, "nodeclaim_uid": uid},
                )
                fresh = await self._fleet.deployment(md.namespace, md.name)
                if fresh is None:
                    break
                md = fresh
            gone = [uid for uid in md.releases() if uid not in alive]
            await self._fleet.forget_releases(md, gone)
        return Result(requeue_after=PERIOD)


def _younger(created: datetime | None, now: datetime) -> bool:
    return created is None or (now - created).total_seconds() < GRACE


def _parse(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
