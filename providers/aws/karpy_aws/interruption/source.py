"""The AWS interruption source: queue messages matched to this cluster's instances.

The interruption controller acts on NodeClaims, which it finds by provider id; an EventBridge
event names bare instance ids, and a spot interruption must also take its offering out of the
launch path (Karpenter marks ``spot:<type>:<zone>`` unavailable for 3 minutes). Both need the
instance's zone and type, which only EC2 knows, so this source looks the instances up (one
DescribeInstances of the cluster's instances per batch), marks interrupted spot offerings and
hands back provider ids. Instances that are not this cluster's are left out.
"""

from __future__ import annotations

import attrs

from karpy_aws.instance import Instance, Instances
from karpy_aws.interruption.messages import InterruptionEvent, InterruptionKind, MessageParseError
from karpy_aws.interruption.sqs import ReceivedMessage, SQSInterruptionQueue
from karpy_aws.unavailable import UnavailableOfferings

SPOT_INTERRUPTION_REASON = "SpotInterruption"


@attrs.frozen(kw_only=True)
class Interruption:
    """One message, ready for the controller: the event (or why there is none) and the
    provider ids of this cluster's instances it concerns."""

    message: ReceivedMessage
    provider_ids: tuple[str, ...]

    @property
    def event(self) -> InterruptionEvent | None:
        return self.message.event

    @property
    def error(self) -> MessageParseError | None:
        return self.message.error


class AWSInterruptionSource:
    """Receive interruptions from SQS; acknowledge (delete) each once handled."""

    def __init__(
        self,
        queue: SQSInterruptionQueue,
        instances: Instances,
        *,
        unavailable: UnavailableOfferings,
    ) -> None:
        self._queue = queue
        self._instances = instances
        self._unavailable = unavailable

    async def receive(self) -> tuple[Interruption, ...]:
        """One long poll. Spot interruptions mark their offerings unavailable as a side effect.
        Raises karpy_aws.errors.AWSError if SQS or EC2 fails."""
        messages = await self._queue.receive()
        wanted = {i for m in messages if m.event is not None for i in m.event.instance_ids}
        found: dict[str, Instance] = {}
        if wanted:
            found = {i.id: i for i in await self._instances.list() if i.id in wanted}
        out = []
        for message in messages:
            ours = (
                [found[i] for i in message.event.instance_ids if i in found]
                if message.event is not None
                else []
            )
            if (
                message.event is not None
                and message.event.kind is InterruptionKind.SPOT_INTERRUPTION
            ):
                for instance in ours:
                    self._unavailable.mark_unavailable(
                        reason=SPOT_INTERRUPTION_REASON,
                        capacity_type=instance.capacity_type,
                        instance_type=instance.instance_type,
                        zone=instance.zone,
                    )
            out.append(
                Interruption(message=message, provider_ids=tuple(i.provider_id for i in ours))
            )
        return tuple(out)

    async def acknowledge(self, interruption: Interruption) -> None:
        """Delete the message (after acting on it, or after logging why it could not be read)."""
        await self._queue.delete(interruption.message)
