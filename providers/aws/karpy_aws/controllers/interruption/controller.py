"""The interruption controller: drain nodes AWS is about to take away, before it takes them.

A spot instance gets a two-minute warning; a scheduled retirement, a stop or a termination is
announced as it begins. Waiting for the node to vanish loses those minutes, so Karpenter has
EventBridge send these events to an SQS queue and acts on them. This controller does the same:
it long-polls the queue (one pass per receive, declared as a `karpy.manager.Singleton`, so each
pass has a span and a failing pass backs off), finds in the
operator's cluster view the NodeClaims whose ``status.providerID`` names each message's
instances, and acts as Karpenter's ``interruption`` controller does:

=================================  =========================================================
message                            action
=================================  =========================================================
spot interruption warning          mark ``spot:<type>:<zone>`` unavailable, delete NodeClaim
scheduled change (AWS Health)      delete the NodeClaim
state change: stopping, stopped,   delete the NodeClaim
shutting-down, terminated
capacity-reservation interruption  the reservation counts as full, delete the NodeClaim
rebalance recommendation           an event only
=================================  =========================================================

Deleting the NodeClaim starts karpy's ordinary termination (taint, drain, terminate). Each
handled message is deleted from the queue, and so is every message that cannot be read (logged),
so nothing blocks the queue. A message whose handling failed stays: SQS shows it again after
its visibility timeout, and the pass raises so the loop backs off. Messages of one receive are
handled concurrently, at most ``concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

import attrs
from opentelemetry import trace

from karpy.apis.kube.node import Node
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Event, EventType, Recorder, involved
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.manager import Singleton
from karpy.runtime.bounded import count_failures
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.series import disrupted_labels
from karpy.state.view import ClusterView
from karpy_aws.controllers.interruption.messages import (
    Action,
    InterruptionEvent,
    InterruptionKind,
    UnsupportedMessageError,
)
from karpy_aws.controllers.interruption.sqs import (
    VISIBILITY_TIMEOUT_SECONDS,
    WAIT_SECONDS,
    ReceivedMessage,
    SQSInterruptionQueue,
)
from karpy_aws.providers.capacityreservations import ReservationAvailability
from karpy_aws.providers.instance import instance_id_of
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.session import AWSClient

CONCURRENCY: Final = 10
"""Messages handled at once (Karpenter's ParallelizeUntil(10); one receive brings at most 10)."""
RECEIVE_MARGIN: Final = 10.0
"""Seconds a receive may take beyond its long poll before the pass gives up on it."""
LOOKUP_TIMEOUT: Final = 60.0
"""Deadline in seconds for resolving the queue's URL."""
MESSAGE_TIMEOUT: Final = 60.0
"""Deadline in seconds for handling one message (events, deletes, deleting the message)."""

TERMINATING_ON_INTERRUPTION: Final = "TerminatingOnInterruption"
_STOPPING_STATES: Final = frozenset({"stopping", "stopped"})

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ decisions (pure)


@attrs.frozen
class Notice:
    """The Kubernetes event Karpenter records on the NodeClaim and its Node for a message."""

    type: EventType
    reason: str
    message: str


def notice_for(event: InterruptionEvent) -> Notice | None:
    """Karpenter's event for ``event``'s kind (None: it records none, e.g. a state change to
    running, or a capacity-reservation interruption)."""
    match event.kind:
        case InterruptionKind.SPOT_INTERRUPTION:
            return Notice(
                EventType.WARNING, "SpotInterrupted", "Spot interruption warning was triggered"
            )
        case InterruptionKind.REBALANCE_RECOMMENDATION:
            return Notice(
                EventType.NORMAL,
                "SpotRebalanceRecommendation",
                "Spot rebalance recommendation was triggered",
            )
        case InterruptionKind.SCHEDULED_CHANGE:
            return Notice(
                EventType.WARNING,
                "InstanceUnhealthy",
                "An unhealthy warning was triggered for the instance",
            )
        case InterruptionKind.STATE_CHANGE if event.action is Action.CORDON_AND_DRAIN:
            if event.state in _STOPPING_STATES:
                return Notice(EventType.WARNING, "InstanceStopping", "Instance is stopping")
            return Notice(EventType.WARNING, "InstanceTerminating", "Instance is terminating")
        case _:
            return None


def message_kind(event: InterruptionEvent) -> str:
    """Karpenter's name for the message's kind: the ``reason`` of the disruption metric."""
    match event.kind:
        case InterruptionKind.SPOT_INTERRUPTION:
            return "spot_interrupted"
        case InterruptionKind.REBALANCE_RECOMMENDATION:
            return "rebalance_recommendation"
        case InterruptionKind.SCHEDULED_CHANGE:
            return "scheduled_change"
        case InterruptionKind.CAPACITY_RESERVATION_INTERRUPTION:
            return "capacity_reservation_interrupted"
        case InterruptionKind.STATE_CHANGE if event.action is Action.CORDON_AND_DRAIN:
            return "instance_stopped" if event.state in _STOPPING_STATES else "instance_terminated"
        case _:
            return "no_op"


def claims_by_instance(claims: Sequence[NodeClaim]) -> dict[str, tuple[NodeClaim, ...]]:
    """NodeClaims keyed by the EC2 instance id in their ``status.providerID`` (NodeClaims not
    launched yet, or with another provider's id, are left out)."""
    found: dict[str, list[NodeClaim]] = {}
    for claim in claims:
        instance_id = instance_id_of(claim.status.provider_id)
        if instance_id is not None:
            found.setdefault(instance_id, []).append(claim)
    return {k: tuple(v) for k, v in found.items()}


# ------------------------------------------------------------------ the controller


class InterruptionError(Exception):
    """Some messages of a receive could not be handled; they come back after their visibility
    timeout (the message names how many)."""


@attrs.define
class _Batch:
    """What one pass knows: the NodeClaims and Nodes the messages name, and the NodeClaims
    this pass already deleted (two messages may name one instance)."""

    claims: Mapping[str, tuple[NodeClaim, ...]]
    nodes: Mapping[str, Node]
    deleted: set[str] = attrs.Factory(set)


class InterruptionController:
    """Receive interruption messages and act on them, one receive per pass."""

    name: ClassVar[str] = "interruption"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        sqs: AWSClient,
        *,
        queue: str,
        unavailable: UnavailableOfferings,
        clock: Clock,
        telemetry: Telemetry,
        concurrency: int = CONCURRENCY,
        wait_seconds: int = WAIT_SECONDS,
        visibility_timeout: int = VISIBILITY_TIMEOUT_SECONDS,
        reservations: ReservationAvailability | None = None,
    ) -> None:
        if not queue:
            msg = "InterruptionController: queue must be a queue name or URL"
            raise ValueError(msg)
        if concurrency < 1 or wait_seconds < 0 or visibility_timeout < 0:
            msg = (
                "InterruptionController: concurrency must be >= 1, wait_seconds and "
                "visibility_timeout >= 0"
            )
            raise ValueError(msg)
        self._kube = kube
        self._view = view
        self._sqs = sqs
        self._queue_ref = queue
        self._queue: SQSInterruptionQueue | None = None
        self._unavailable = unavailable
        self._telemetry = telemetry
        self._clock = clock
        self._recorder = Recorder(kube, clock)
        self._concurrency = concurrency
        self._wait = wait_seconds
        self._visibility = visibility_timeout
        self._reservations = reservations

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One long poll and its messages. Raises AWSError or KubeError when the queue or the
        apiserver fails, InterruptionError when some messages could not be handled (the runner
        backs off); otherwise polls again at once."""
        queue = await self._resolve()
        async with asyncio.timeout(self._wait + RECEIVE_MARGIN):
            messages = await queue.receive()
        trace.get_current_span().set_attribute("karpy.interruption.messages", len(messages))
        if not messages:
            return Result(requeue_after=0)
        batch = self._lookup(messages)
        failed = await count_failures(
            [
                (
                    f"{self.name}-{message.message_id}",
                    functools.partial(self._handle_guarded, queue, message, batch),
                )
                for message in messages
            ],
            limit=self._concurrency,
        )
        if failed:
            msg = (
                f"{failed} of {len(messages)} interruption messages could not be handled; "
                "they return after the queue's visibility timeout"
            )
            raise InterruptionError(msg)
        return Result(requeue_after=0)

    async def _resolve(self) -> SQSInterruptionQueue:
        """The queue, its URL looked up once by name (GetQueueUrl) unless given as a URL."""
        if self._queue is None:
            async with asyncio.timeout(LOOKUP_TIMEOUT):
                self._queue = await SQSInterruptionQueue.resolve(
                    self._sqs,
                    self._queue_ref,
                    wait_seconds=self._wait,
                    visibility_timeout=self._visibility,
                )
            log.debug("interruption queue found", extra={"queue_url": self._queue.queue_url})
        return self._queue

    def _lookup(self, messages: Sequence[ReceivedMessage]) -> _Batch:
        """The NodeClaims the receive names, and their Nodes, as the cluster view has them."""
        wanted = {i for m in messages if m.event is not None for i in m.event.instance_ids}
        if not wanted:
            return _Batch(claims={}, nodes={})
        claims = {
            instance_id: found
            for instance_id, found in claims_by_instance(self._view.nodeclaims()).items()
            if instance_id in wanted
        }
        nodes: dict[str, Node] = {}
        for found in claims.values():
            for claim in found:
                provider_id = claim.status.provider_id or ""
                for node in self._view.nodes_with_provider_id(provider_id):
                    nodes[provider_id] = node
        return _Batch(claims=claims, nodes=nodes)

    async def _handle_guarded(
        self, queue: SQSInterruptionQueue, message: ReceivedMessage, batch: _Batch
    ) -> bool:
        """Handle one message within its deadline; False (logged) if that failed."""
        try:
            async with asyncio.timeout(MESSAGE_TIMEOUT):
                await self._handle(queue, message, batch)
        except Exception as error:
            log.warning(
                "failed handling interruption message",
                extra={
                    "message_id": message.message_id,
                    "error": str(error) or type(error).__name__,
                },
            )
            return False
        return True

    async def _handle(
        self, queue: SQSInterruptionQueue, message: ReceivedMessage, batch: _Batch
    ) -> None:
        event = message.event
        metrics = self._telemetry.metrics.interruption
        kind = {"message_type": message_kind(event) if event is not None else "unknown"}
        metrics.received_messages_total.add(1, kind)
        if event is not None:
            waited = (self._clock.now() - event.time).total_seconds()
            metrics.message_queue_duration_seconds.record(max(0.0, waited))
        if event is None:
            if isinstance(message.error, UnsupportedMessageError):
                log.debug(
                    "ignoring message that is not an interruption",
                    extra={"message_id": message.message_id, "error": str(message.error)},
                )
            else:
                log.warning(
                    "failed parsing interruption message",
                    extra={"message_id": message.message_id, "error": str(message.error)},
                )
        else:
            log.debug(
                "handling interruption message",
                extra={
                    "message_id": message.message_id,
                    "message_kind": message_kind(event),
                    "instance_ids": list(event.instance_ids),
                    "action": event.action.value,
                },
            )
            reservation = event.capacity_reservation_id
            if (
                event.kind is InterruptionKind.CAPACITY_RESERVATION_INTERRUPTION
                and reservation
                and self._reservations is not None
            ):
                # EC2 is taking the reservation's capacity back: launch nothing more into it.
                self._reservations.exhausted(reservation)
            for instance_id in event.instance_ids:
                for claim in batch.claims.get(instance_id, ()):
                    node = batch.nodes.get(claim.status.provider_id or "")
                    await self._act(event, claim, node, batch)
        await queue.delete(message)
        metrics.deleted_messages_total.add(1, kind)

    async def _act(
        self, event: InterruptionEvent, claim: NodeClaim, node: Node | None, batch: _Batch
    ) -> None:
        """Karpenter's handleNodeClaim: the kind's event, the spot offering marked unavailable,
        then the NodeClaim deleted unless the message only informs."""
        kind = message_kind(event)
        notice = notice_for(event)
        if notice is not None:
            await self._publish(notice, claim, node)
        labels = claim.metadata.labels
        zone = labels.get(wk.LABEL_TOPOLOGY_ZONE, "")
        instance_type = labels.get(wk.LABEL_INSTANCE_TYPE, "")
        if event.kind is InterruptionKind.SPOT_INTERRUPTION and zone and instance_type:
            self._unavailable.mark_unavailable(
                reason=kind,
                capacity_type=wk.CAPACITY_TYPE_SPOT,
                instance_type=instance_type,
                zone=zone,
            )
        if event.action is Action.NONE:
            return
        name = claim.metadata.name or ""
        if claim.metadata.deletion_timestamp is not None or name in batch.deleted:
            return
        batch.deleted.add(name)
        try:
            await self._kube.delete(NODECLAIMS, name)
        except NotFoundError:
            return
        except Exception:
            batch.deleted.discard(name)
            raise
        nodepool = labels.get(wk.LABEL_NODEPOOL, "")
        log.info(
            "initiating delete from interruption message",
            extra={
                "nodeclaim": name,
                "node": node.metadata.name if node is not None else claim.status.node_name,
                "provider_id": claim.status.provider_id,
                "nodepool": nodepool,
                "message_kind": kind,
                "action": event.action.value,
                "event_id": event.id,
            },
        )
        await self._publish(
            Notice(
                EventType.WARNING,
                TERMINATING_ON_INTERRUPTION,
                "Interruption triggered termination for the NodeClaim",
            ),
            claim,
            None,
        )
        if node is not None:
            await self._publish(
                Notice(
                    EventType.WARNING,
                    TERMINATING_ON_INTERRUPTION,
                    "Interruption triggered termination for the Node",
                ),
                None,
                node,
            )
        self._telemetry.metrics.nodeclaims_disrupted_total.add(1, disrupted_labels(claim, kind))

    async def _publish(self, notice: Notice, claim: NodeClaim | None, node: Node | None) -> None:
        """Record ``notice`` on the NodeClaim and the Node (either may be None). Best effort:
        the recorder logs a failed write."""
        now = asyncio.get_running_loop().time()
        targets = []
        if claim is not None:
            targets.append(involved(NODECLAIMS, claim))
        if node is not None:
            targets.append(involved(NODES, node))
        for obj in targets:
            await self._recorder.publish(
                Event(involved=obj, type=notice.type, reason=notice.reason, message=notice.message),
                now=now,
            )
