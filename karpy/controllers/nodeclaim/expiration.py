"""Delete a NodeClaim once it is older than its spec.expireAfter (Karpenter's
nodeclaim.expiration controller).

Expiry is forceful, as in Karpenter v1: no disruption budget, no do-not-disrupt, no waiting for
a replacement. The NodeClaim is deleted; its finalizer deletes the Node, whose termination
drains it (PDBs respected until the NodeClaim's terminationGracePeriod, if any, runs out) and
the provisioner launches capacity for the evicted pods as for any other pending pods. Age is
counted from the NodeClaim's creationTimestamp; `Never` never expires. Keyed by NodeClaim name,
fed by NodeClaim events; a young NodeClaim is requeued for the moment it expires.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar, Final

from karpy.apis.duration import parse_duration
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.controllers.nodeclaim import events
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.series import disrupted_labels
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

DISRUPTED_REASON: Final = "expired"
"""The `reason` label of karpenter_nodeclaims_disrupted_total for an expiry (Karpenter's)."""


class ExpirationController:
    """Delete expired NodeClaims (the module docstring); keyed by NodeClaim name."""

    name: ClassVar[str] = "nodeclaim.expiration"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        recorder: Recorder,
        telemetry: Telemetry,
    ) -> None:
        self._client = client
        self._view = view
        self._clock = clock
        self._recorder = recorder
        self._telemetry = telemetry

    def spec(self) -> Controller:
        """Keyed by NodeClaim name, woken by the NodeClaim's changes (and its own requeue at
        the expiry time)."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(Watch(kind=NODECLAIMS),),
            reads=CORE_KINDS,
        )

    async def reconcile(self, name: str) -> Result:
        """Side effects: a DisruptionTerminating event and the NodeClaim's deletion, once it
        has expired; otherwise a requeue at its expiry."""
        with bind(controller=self.name, nodeclaim=name):
            claim = self._view.nodeclaim(name)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                return Result()
            created = claim.metadata.creation_timestamp
            expire_after = parse_duration(
                claim.spec.expire_after, field_name=f"nodeclaim {name!r} spec.expireAfter"
            )
            if created is None or expire_after is None:
                return Result()
            remaining = (created + expire_after - self._clock.now()).total_seconds()
            if remaining > 0:
                return Result(requeue_after=remaining)
            await self._expire(claim)
            return Result()

    async def _expire(self, claim: NodeClaim) -> None:
        name = claim.metadata.name or ""
        nodepool = claim.metadata.labels.get(wk.LABEL_NODEPOOL, "")
        try:
            await self._client.delete(NODECLAIMS, name)
        except NotFoundError:
            return
        log.info(
            "deleting expired nodeclaim",
            extra={"nodepool": nodepool, "expire-after": claim.spec.expire_after},
        )
        self._telemetry.metrics.nodeclaims_disrupted_total.add(
            1, disrupted_labels(claim, DISRUPTED_REASON)
        )
        await self._recorder.publish(
            events.expired_terminating(claim), now=asyncio.get_running_loop().time()
        )
