"""Launch: turn a NodeClaim into a cloud instance through CloudProvider.create.

Karpenter's rules: a NodeClaim that cannot be launched for lack of capacity, or because its
NodeClass is not ready, is deleted so the provisioner can try again elsewhere; any other create
failure the provider describes becomes Launched=Unknown with its reason; a NodeClaim that is still
not Launched five minutes after it was created is deleted. What the provider chose (providerID,
capacity, allocatable, image, the labels of the instance type, zone and capacity type) is recorded
on the working copy. A create that succeeded is remembered until its result is written, so a lost
status write never launches a second instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Final

import attrs
from opentelemetry.trace import NoOpTracer, Tracer

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.cloudprovider import (
    CloudProvider,
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from karpy.controllers.nodeclaim import events
from karpy.controllers.nodeclaim.lifecycle.fields import Said, log_fields
from karpy.controllers.nodeclaim.lifecycle.outcome import Outcome
from karpy.controllers.nodeclaim.lifecycle.poolhealth import PoolHealth
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import current_link, remote_parent
from karpy.state.conditions import claim_is_true, set_condition
from karpy.state.tracecontext import origin

log = logging.getLogger(__name__)

LAUNCH_TIMEOUT: Final = datetime.timedelta(minutes=5)
"""A NodeClaim not Launched this long after its creation is deleted (Karpenter's launch TTL)."""


class Launch:
    """The launch step. `launched` maps a NodeClaim uid to the create result not yet written."""

    def __init__(
        self,
        kube: KubeClient,
        cloud_provider: CloudProvider,
        *,
        clock: Clock,
        recorder: Recorder,
        launched: dict[str, NodeClaim],
        said: Said | None = None,
        tracer: Tracer | None = None,
        pool_health: PoolHealth | None = None,
    ) -> None:
        self._tracer = tracer if tracer is not None else NoOpTracer()
        self._pool_health = pool_health
        self._kube = kube
        self._recorder = recorder
        self._cloud = cloud_provider
        self._clock = clock
        self._launched = launched
        self._said = said if said is not None else Said()

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        if claim_is_true(nodeclaim, ConditionType.LAUNCHED):
            self._launched.pop(nodeclaim.metadata.uid or "", None)
            return Outcome(nodeclaim)
        now = self._clock.now()
        created = nodeclaim.metadata.creation_timestamp
        if created is not None and now - created >= LAUNCH_TIMEOUT:
            log.info(
                "terminating due to timeout",
                extra={"reason": "launch_timeout", "ttl": LAUNCH_TIMEOUT.total_seconds()},
            )
            if self._pool_health is not None:
                await self._pool_health.failed(nodeclaim)
            return await self._delete(nodeclaim)
        cached = self._launched.get(nodeclaim.metadata.uid or "")
        if cached is None:
            try:
                cached = await self._create(nodeclaim)
            except (InsufficientCapacityError, NodeClassNotReadyError) as error:
                reason = (
                    "InsufficientCapacityError"
                    if isinstance(error, InsufficientCapacityError)
                    else "NodeClassNotReady"
                )
                log.warning(
                    "failed launching nodeclaim", extra={"reason": reason, "error": str(error)}
                )
                await self._recorder.publish(
                    events.launch_failed(nodeclaim, reason, str(error)),
                    now=asyncio.get_running_loop().time(),
                )
                return await self._delete(nodeclaim)
            except CreateError as error:
                marked = set_condition(
                    nodeclaim,
                    ConditionType.LAUNCHED,
                    ConditionStatus.UNKNOWN,
                    reason=error.condition_reason,
                    message=error.condition_message,
                    now=now,
                )
                log.warning("failed launching nodeclaim", extra={"error": str(error)})
                return Outcome(marked, stop=Result(requeue=True))
            self._launched[nodeclaim.metadata.uid or ""] = cached
        launched = _with_details(nodeclaim, cached)
        launched = set_condition(
            launched, ConditionType.LAUNCHED, ConditionStatus.TRUE, reason="Launched", now=now
        )
        if self._said.first("launched", nodeclaim):
            log.info("launched nodeclaim", extra=log_fields(launched))
        return Outcome(launched)

    async def _create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """CloudProvider.create inside a "launch nodeclaim" span. The span is a child of the span
        that created the NodeClaim (its karpy.sh/traceparent), so the provider call shows in
        the provisioning batch's (or disruption command's) trace; it links back to this
        reconcile. Without the annotation it is a child of this reconcile."""
        parent = remote_parent(origin(nodeclaim))
        with self._tracer.start_as_current_span(
            "launch nodeclaim",
            context=parent,
            links=current_link() if parent is not None else None,
            attributes={"karpy.nodeclaim": nodeclaim.metadata.name or ""},
        ) as span:
            launched = await self._cloud.create(nodeclaim)
            labels = launched.metadata.labels
            span.set_attributes(
                {
                    "karpy.provider_id": launched.status.provider_id or "",
                    "karpy.instance_type": labels.get(wk.LABEL_INSTANCE_TYPE, ""),
                    "karpy.zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
                    "karpy.capacity_type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                }
            )
            return launched

    async def _delete(self, nodeclaim: NodeClaim) -> Outcome:
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(NODECLAIMS, nodeclaim.metadata.name or "")
        return Outcome(nodeclaim, stop=Result(), deleted=True)


def _with_details(nodeclaim: NodeClaim, launched: NodeClaim) -> NodeClaim:
    """`nodeclaim` with what the provider reports; the NodeClaim's own labels win over the
    provider's, as user-set labels trump resolved ones in Karpenter."""
    metadata = attrs.evolve(
        nodeclaim.metadata,
        labels={**launched.metadata.labels, **nodeclaim.metadata.labels},
        annotations={**launched.metadata.annotations, **nodeclaim.metadata.annotations},
    )
    status = attrs.evolve(
        nodeclaim.status,
        provider_id=launched.status.provider_id,
        image_id=launched.status.image_id,
        capacity=launched.status.capacity,
        allocatable=launched.status.allocatable,
    )
    return attrs.evolve(nodeclaim, metadata=metadata, status=status)
