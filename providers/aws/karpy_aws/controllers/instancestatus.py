"""Instance status polling: replace impaired instances, drain ahead of scheduled maintenance.

EC2 reports, per instance, two health checks (the instance's own and the host system's) and
the maintenance events it has scheduled (a reboot, a retirement, a stop). Neither reaches the
interruption queue reliably: a failed status check sends no event at all, and a scheduled event
is announced through AWS Health only where it is set up. So, as Karpenter does, the leader reads
DescribeInstanceStatus every minute and, for the instances its NodeClaims run on,

* an instance whose instance or system status is ``impaired`` is replaced at once: its NodeClaim
  gets the termination deadline of now (``karpenter.sh/nodeclaim-termination-timestamp``, so
  draining does not wait on what cannot run) and is deleted, as node repair deletes a node;
* an instance with a scheduled event that is neither completed nor canceled is drained ahead of
  the event: its NodeClaim is deleted, as a scheduled-change message would.

Each gets an ``InstanceUnhealthy`` event and counts in ``karpenter_nodeclaims_disrupted_total``
(reason ``instance_status_failure`` or ``scheduled_change``). Deciding is pure; the controller
only reads, patches and deletes.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.meta import with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Event, EventType, Recorder, involved
from karpy.kube.kinds import NODECLAIMS
from karpy.manager import Singleton
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.series import disrupted_labels
from karpy.state.view import ClusterView
from karpy_aws.controllers.interruption.controller import claims_by_instance
from karpy_aws.session import AWSClient

POLL_PERIOD: Final = 60.0
"""Seconds between passes (Karpenter polls each minute)."""
CALL_TIMEOUT: Final = 60.0
"""Deadline in seconds for one DescribeInstanceStatus page run."""
PAGE: Final = 1000
"""Statuses per page (EC2's largest)."""
UNHEALTHY_REASON: Final = "InstanceUnhealthy"
_DONE_EVENT: Final = ("[Completed]", "[Canceled]")

log = logging.getLogger(__name__)


class Verdict(enum.StrEnum):
    """What an instance's status asks for (the disruption metric's reason)."""

    IMPAIRED = "instance_status_failure"
    SCHEDULED = "scheduled_change"


@attrs.frozen(kw_only=True)
class InstanceHealth:
    """One DescribeInstanceStatus entry, as far as karpy acts on it."""

    instance_id: str
    instance_status: str
    system_status: str
    events: tuple[str, ...] = ()
    """Codes of scheduled events not completed or canceled."""

    @property
    def verdict(self) -> Verdict | None:
        if "impaired" in (self.instance_status, self.system_status):
            return Verdict.IMPAIRED
        if self.events:
            return Verdict.SCHEDULED
        return None


def parse_status(raw: Mapping[str, Any]) -> InstanceHealth:
    """One InstanceStatuses entry (pure)."""
    events = tuple(
        str(e.get("Code", ""))
        for e in raw.get("Events", [])
        if not str(e.get("Description", "")).startswith(_DONE_EVENT)
    )
    return InstanceHealth(
        instance_id=str(raw["InstanceId"]),
        instance_status=str(raw.get("InstanceStatus", {}).get("Status", "")),
        system_status=str(raw.get("SystemStatus", {}).get("Status", "")),
        events=events,
    )


def message_for(health: InstanceHealth) -> str:
    """The InstanceUnhealthy event's message."""
    if health.verdict is Verdict.IMPAIRED:
        return (
            f"Instance status check failed (instance {health.instance_status}, "
            f"system {health.system_status}); replacing the instance"
        )
    return f"Instance has scheduled maintenance ({', '.join(health.events)}); draining ahead of it"


async def describe_health(ec2: AWSClient, instance_ids: Iterable[str]) -> list[InstanceHealth]:
    """The status of those of ``instance_ids`` that are running. The region's running
    instances are listed (pages of up to 1000) rather than asked for by id: EC2 refuses a whole
    call that names an instance already gone, which a NodeClaim being deleted may still name."""
    wanted = set(instance_ids)
    rows = await ec2.paginate(
        "DescribeInstanceStatus", result_key="InstanceStatuses", MaxResults=PAGE
    )
    return [parse_status(r) for r in rows if str(r.get("InstanceId")) in wanted]


class InstanceStatusController:
    """Poll DescribeInstanceStatus for the NodeClaims' instances and act, once a minute."""

    name: ClassVar[str] = "instancestatus"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        ec2: AWSClient,
        *,
        clock: Clock,
        telemetry: Telemetry,
        period: float = POLL_PERIOD,
    ) -> None:
        self._kube = kube
        self._view = view
        self._ec2 = ec2
        self._clock = clock
        self._telemetry = telemetry
        self._recorder = Recorder(kube, clock)
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
        """One pass: the names of the NodeClaims it deleted."""
        claims = {
            instance_id: found
            for instance_id, found in claims_by_instance(self._view.nodeclaims()).items()
            if any(c.metadata.deletion_timestamp is None for c in found)
        }
        if not claims:
            return ()
        async with asyncio.timeout(CALL_TIMEOUT):
            health = await describe_health(self._ec2, claims)
        deleted: list[str] = []
        for status in health:
            verdict = status.verdict
            if verdict is None:
                continue
            for claim in claims.get(status.instance_id, ()):
                if claim.metadata.deletion_timestamp is None and await self._replace(
                    claim, status, verdict
                ):
                    deleted.append(claim.metadata.name or "")
        return tuple(deleted)

    async def _replace(self, claim: NodeClaim, health: InstanceHealth, verdict: Verdict) -> bool:
        name = claim.metadata.name or ""
        try:
            if (
                verdict is Verdict.IMPAIRED
                and wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP not in claim.metadata.annotations
            ):
                stamp = _stamp(self._clock.now())
                stamped = attrs.evolve(
                    claim,
                    metadata=with_annotations(
                        claim.metadata, {wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: stamp}
                    ),
                )
                await self._kube.patch(NODECLAIMS, claim, stamped)
            await self._kube.delete(NODECLAIMS, name)
        except NotFoundError:
            return False
        log.info(
            "deleting nodeclaim for its instance status",
            extra={
                "nodeclaim": name,
                "instance": health.instance_id,
                "reason": verdict.value,
                "instance_status": health.instance_status,
                "system_status": health.system_status,
                "events": list(health.events),
            },
        )
        self._telemetry.metrics.nodeclaims_disrupted_total.add(
            1, disrupted_labels(claim, verdict.value)
        )
        await self._recorder.publish(
            Event(
                involved=involved(NODECLAIMS, claim),
                type=EventType.WARNING,
                reason=UNHEALTHY_REASON,
                message=message_for(health),
            ),
            now=asyncio.get_running_loop().time(),
        )
        return True


def _stamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
