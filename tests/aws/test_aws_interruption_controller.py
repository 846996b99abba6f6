"""The interruption controller on moto's SQS and the real local control plane.

Built as ``karpy run`` builds it (through ``build`` with the ``interruption-queue`` setting), it
deletes the NodeClaims of instances AWS is taking away, marks an interrupted spot offering
unavailable, records Karpenter's events, and deletes every message it handled or could not
read. Built directly (with the fault injector in front of moto), a failing receive backs off
and retries, a message whose deletion failed comes back and is handled again without a second
delete, and a burst larger than one receive is handled a few messages at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import orjson
import pytest

from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.cloudprovider.registry import ProviderConfigError
from karpy.kube.client import KubeClient
from karpy.kube.events import REPORTING_CONTROLLER
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.manager import ProviderExtension
from karpy.runtime.backoff import Backoff
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.controllers.interruption.controller import (
    InterruptionController,
    message_kind,
    notice_for,
)
from karpy_aws.controllers.interruption.messages import parse_event
from karpy_aws.operator import AWSProviderOptions
from karpy_aws.providers.capacityreservations import ReservationAvailability
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.session import AWSSession
from tests.support.kubehttp import KubeHTTP
from tests.support.providers import Informed, run_loops
from tests.support.waiting import eventually

from .conftest import REGION, FaultInjector, Moto, boto_client, make_nodeclaim, ready_nodeclass
from .test_aws_interruption_messages import (
    REBALANCE,
    RESERVATION,
    RUNNING,
    SCHEDULED,
    SPOT,
    STOPPING,
)
from .test_aws_run import running

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

HOLD = "karpy.test/hold"
"""A finalizer nothing removes, so a deleted NodeClaim stays readable (deletionTimestamp set)."""


@attrs.frozen
class Queue:
    name: str
    url: str
    client: Any

    def send(self, *bodies: dict[str, Any] | str) -> None:
        for body in bodies:
            text = body if isinstance(body, str) else orjson.dumps(body).decode()
            self.client.send_message(QueueUrl=self.url, MessageBody=text)

    def left(self) -> int:
        """Messages still in the queue, visible or being handled."""
        found = self.client.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(found["ApproximateNumberOfMessages"]) + int(
            found["ApproximateNumberOfMessagesNotVisible"]
        )

    async def emptied(self) -> bool:
        """A probe: every message sent has been deleted. Only for queues whose messages keep
        a long visibility timeout: moto computes ApproximateNumberOfMessages and
        ...NotVisible in two scans, so a message whose visibility lapses between them is
        counted by neither (use `deletions` with the fault injector's record instead)."""
        return self.left() == 0


def deletions(faults: FaultInjector, count: int) -> Callable[[], Awaitable[bool]]:
    """A probe: `count` DeleteMessage calls succeeded (exact, unlike moto's counts)."""

    async def probe() -> bool:
        return faults.succeeded.count("DeleteMessage") >= count

    return probe


@pytest.fixture
def queue(moto: Moto) -> Queue:
    client = boto_client(moto, "sqs")
    name = f"interruptions-{secrets.token_hex(4)}"
    url = client.create_queue(QueueName=name)["QueueUrl"]
    return Queue(name, url, client)


def _instance_id() -> str:
    return f"i-{secrets.token_hex(9)[:17]}"


@attrs.frozen
class Claim:
    name: str
    uid: str
    instance_id: str
    node: str
    node_uid: str


async def _claim(
    kube: KubeClient,
    cleanup: list[str],
    *,
    nodeclass: str = "default",
    instance_type: str = "c5.large",
    zone: str = "us-west-2b",
) -> Claim:
    """A launched, registered spot NodeClaim (held by a finalizer) and its Node."""
    token = secrets.token_hex(4)
    instance_id = _instance_id()
    provider_id = f"aws:///{zone}/{instance_id}"
    base = make_nodeclaim(name=f"int-{token}", nodeclass=nodeclass)
    labels = {
        **base.metadata.labels,
        wk.LABEL_INSTANCE_TYPE: instance_type,
        wk.LABEL_TOPOLOGY_ZONE: zone,
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT,
    }
    claim = attrs.evolve(
        base, metadata=attrs.evolve(base.metadata, labels=labels, finalizers=(HOLD,))
    )
    node = f"node-{token}"
    cleanup.append(NODECLAIMS.object_path(claim.metadata.name or ""))
    cleanup.append(NODES.object_path(node))
    created = await kube.create(NODECLAIMS, claim)
    await kube.patch_status(
        NODECLAIMS,
        created.metadata.name or "",
        attrs.evolve(created.status, provider_id=provider_id, node_name=node),
    )
    made = await kube.create(
        NODES, Node(metadata=ObjectMeta(name=node), spec=NodeSpec(provider_id=provider_id))
    )
    return Claim(
        created.metadata.name or "",
        created.metadata.uid or "",
        instance_id,
        node,
        made.metadata.uid or "",
    )


async def _deleting(kube: KubeClient, claim: Claim) -> bool:
    found: NodeClaim = await kube.get(NODECLAIMS, claim.name)
    return found.metadata.deletion_timestamp is not None


def _reasons(kube_http: KubeHTTP, uid: str) -> list[str]:
    """The reasons of karpy's events about `uid` (the node controller adds its own to Nodes)."""
    return sorted(r for _, r in kube_http.events_about(uid, component=REPORTING_CONTROLLER))


def _for(body: dict[str, Any], *instance_ids: str) -> dict[str, Any]:
    """``body`` naming ``instance_ids`` instead of its own instances."""
    detail = dict(body["detail"])
    if "affectedEntities" in detail:
        detail["affectedEntities"] = [{"entityValue": i} for i in instance_ids]
    elif "instance-ids" in detail:
        detail["instance-ids"] = list(instance_ids)
    else:
        detail["instance-id"] = instance_ids[0]
    return {**body, "id": secrets.token_hex(8), "detail": detail}


def _state(state: str) -> dict[str, Any]:
    return {**STOPPING, "detail": {**STOPPING["detail"], "state": state}}


def _pool(nodeclass: str) -> NodePool:
    return NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    requirements=(),
                    node_class_ref=NodeClassReference(
                        group=awslabels.AWS_GROUP, kind="EC2NodeClass", name=nodeclass
                    ),
                )
            )
        ),
    )


async def _unavailable(provider: AWSCloudProvider, nodeclass: str) -> set[tuple[str, str, str]]:
    """Offerings get_instance_types reports unavailable, in the zones the NodeClass has."""
    types = await provider.get_instance_types(_pool(nodeclass))
    return {
        (t.name, o.zone, o.capacity_type)
        for t in types
        for o in t.offerings
        if not o.available and o.zone in ("us-west-2a", "us-west-2b", "us-west-2c")
    }


async def _nodeclass(kube: KubeClient, moto: Moto, cleanup: list[str]) -> str:
    """An EC2NodeClass whose status has the seeded subnets (its zones: 2a, 2b, 2c)."""
    name = f"int-{secrets.token_hex(4)}"
    nodeclass = ready_nodeclass(moto, name=name)
    cleanup.append(EC2NODECLASSES.object_path(name))
    await kube.create(EC2NODECLASSES, nodeclass)
    await kube.patch_status(EC2NODECLASSES, name, nodeclass.status)
    return name


def _task_names() -> set[str]:
    return {t.get_name() for t in asyncio.all_tasks() if not t.done()}


async def _loop_started(name: str) -> bool:
    return name in _task_names()


# ------------------------------------------------------------------ through build()


async def test_each_message_kind_leads_to_karpenters_action(
    kube: KubeClient, kube_http: KubeHTTP, moto: Moto, queue: Queue, cleanup: list[str]
) -> None:
    nodeclass = await _nodeclass(kube, moto, cleanup)
    cases: dict[str, tuple[dict[str, Any], bool, list[str]]] = {
        # name: (message, NodeClaim deleted, events on the NodeClaim)
        "spot": (SPOT, True, ["SpotInterrupted", "TerminatingOnInterruption"]),
        "scheduled": (SCHEDULED, True, ["InstanceUnhealthy", "TerminatingOnInterruption"]),
        "stopping": (STOPPING, True, ["InstanceStopping", "TerminatingOnInterruption"]),
        "stopped": (_state("stopped"), True, ["InstanceStopping", "TerminatingOnInterruption"]),
        "shutting-down": (
            _state("shutting-down"),
            True,
            ["InstanceTerminating", "TerminatingOnInterruption"],
        ),
        "terminated": (
            _state("terminated"),
            True,
            ["InstanceTerminating", "TerminatingOnInterruption"],
        ),
        "reservation": (RESERVATION, True, ["TerminatingOnInterruption"]),
        "rebalance": (REBALANCE, False, ["SpotRebalanceRecommendation"]),
        "running": (RUNNING, False, []),
    }
    claims = {
        case: await _claim(
            kube,
            cleanup,
            nodeclass=nodeclass,
            # Only the spot-interrupted NodeClaim's offering may be marked.
            instance_type="m5.large" if case == "spot" else "c5.large",
            zone="us-west-2a" if case == "spot" else "us-west-2b",
        )
        for case in cases
    }
    bystander = await _claim(kube, cleanup, nodeclass=nodeclass)
    async with running(kube, moto, **{"interruption-queue": queue.url}) as run:
        await eventually(lambda: _loop_started("aws.interruption"), what="the interruption loop")
        before = await _unavailable(run.provider, nodeclass)
        queue.send(*(_for(body, claims[case].instance_id) for case, (body, _, _) in cases.items()))
        await eventually(queue.emptied, what="every message to be deleted")
        after = await _unavailable(run.provider, nodeclass)
    assert after - before == {("m5.large", "us-west-2a", "spot")}
    got = {
        case: (await _deleting(kube, claim), _reasons(kube_http, claim.uid))
        for case, claim in claims.items()
    }
    assert got == {case: (deleted, reasons) for case, (_, deleted, reasons) in cases.items()}
    spot = claims["spot"]
    assert _reasons(kube_http, spot.node_uid) == ["SpotInterrupted", "TerminatingOnInterruption"]
    assert (await _deleting(kube, bystander), _reasons(kube_http, bystander.uid)) == (False, [])


async def test_messages_it_cannot_use_are_deleted_and_change_nothing(
    kube: KubeClient, kube_http: KubeHTTP, moto: Moto, queue: Queue, cleanup: list[str]
) -> None:
    claim = await _claim(kube, cleanup)
    s3 = {**SPOT, "source": "aws.s3", "detail-type": "Object Created"}
    health_rds = {**SCHEDULED, "detail": {**SCHEDULED["detail"], "service": "RDS"}}
    queue.send(
        "not json",
        '{"source": "aws.ec2"}',
        s3,
        health_rds,
        _for(SPOT, _instance_id()),  # an instance no NodeClaim has
    )
    async with running(kube, moto, **{"interruption-queue": queue.name}):
        await eventually(queue.emptied, what="every message to be deleted")
    assert (await _deleting(kube, claim), _reasons(kube_http, claim.uid)) == (False, [])


async def test_without_a_queue_there_is_no_interruption_loop(
    kube: KubeClient, moto: Moto, queue: Queue, cleanup: list[str]
) -> None:
    claim = await _claim(kube, cleanup)
    queue.send(_for(SPOT, claim.instance_id))
    async with running(kube, moto):
        await eventually(lambda: _loop_started("aws.nodeclass"), what="the provider's loops")
        names = _task_names()
    assert "aws.interruption" not in names
    assert queue.left() == 1
    assert not await _deleting(kube, claim)


# ------------------------------------------------------------------ built directly


@contextlib.asynccontextmanager
async def _controller(
    kube: KubeClient,
    session: AWSSession,
    queue: Queue,
    telemetry: Telemetry | None = None,
    **options: Any,
) -> AsyncIterator[tuple[InterruptionController, UnavailableOfferings]]:
    telemetry = telemetry or Telemetry.setup(service_name="tests")
    unavailable = UnavailableOfferings(FakeClock())
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS, NODES)
    controller = InterruptionController(
        kube,
        informed.view,
        await session.client("sqs"),
        queue=queue.name,
        unavailable=unavailable,
        clock=FakeClock(),
        telemetry=telemetry,
        **{"wait_seconds": 1, "visibility_timeout": 1, **options},
    )
    loops = informed.loops(
        ProviderExtension(controllers=(controller.spec(),)), backoff=Backoff(base=0.05, cap=0.2)
    )
    async with informed.running():
        task = asyncio.create_task(run_loops(loops), name="interruption")
        try:
            yield controller, unavailable
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            telemetry.shutdown()
    assert task.cancelled(), "the loop must end only by cancellation"


async def test_a_failing_receive_backs_off_and_retries(
    kube: KubeClient, session: AWSSession, faults: FaultInjector, queue: Queue, cleanup: list[str]
) -> None:
    claim = await _claim(kube, cleanup)
    faults.fail("ReceiveMessage", "InternalError", status=500, times=2)
    queue.send(_for(SCHEDULED, claim.instance_id))
    async with _controller(kube, session, queue):
        await eventually(deletions(faults, 1), what="the message to be handled")
    assert queue.left() == 0
    assert faults.sent.count("ReceiveMessage") >= 3
    assert await _deleting(kube, claim)


async def test_a_message_whose_deletion_failed_returns_and_is_handled_once(
    kube: KubeClient,
    kube_http: KubeHTTP,
    session: AWSSession,
    faults: FaultInjector,
    queue: Queue,
    cleanup: list[str],
) -> None:
    claim = await _claim(kube, cleanup)
    faults.fail("DeleteMessage", "InternalError", status=500, times=1)
    queue.send(_for(_state("terminated"), claim.instance_id))
    # The probe is the successful DeleteMessage itself, not moto's approximate counts (see
    # `Queue.emptied`): the message turns visible again each second here.
    async with _controller(kube, session, queue):
        await eventually(deletions(faults, 1), what="the message to be deleted")
    assert queue.left() == 0  # exact once the message is gone
    # Received twice (after its visibility timeout), deleted once: the second pass sees the
    # NodeClaim already deleting.
    assert faults.sent.count("DeleteMessage") == 2
    assert _reasons(kube_http, claim.uid) == ["InstanceTerminating", "TerminatingOnInterruption"]


async def test_a_burst_is_handled_a_few_messages_at_a_time(
    kube: KubeClient, session: AWSSession, faults: FaultInjector, queue: Queue, cleanup: list[str]
) -> None:
    claims = [await _claim(kube, cleanup) for _ in range(12)]  # more than one receive brings
    queue.send(*(_for(SPOT, c.instance_id) for c in claims))
    telemetry = Telemetry.setup(service_name="tests")
    spot = '{message_type="spot_interrupted"}'

    async def counted() -> bool:
        deleted = f"karpenter_interruption_deleted_messages_total{spot} 12.0"
        return await deletions(faults, 12)() and deleted in telemetry.prometheus_text()

    # Under load handling 12 messages, 3 at a time, outlasts their 1 s visibility timeout, so
    # moto's counts can read 0 early (see `Queue.emptied`).
    async with _controller(kube, session, queue, telemetry, concurrency=3) as (_, unavailable):
        await eventually(counted, what="every message to be handled")
        exposition = telemetry.prometheus_text()
    assert queue.left() == 0
    assert [await _deleting(kube, c) for c in claims] == [True] * len(claims)
    # Karpenter's interruption counters, by message_type, and the time each message waited.
    assert f"karpenter_interruption_received_messages_total{spot} 12.0" in exposition
    assert f"karpenter_interruption_deleted_messages_total{spot} 12.0" in exposition
    assert "karpenter_interruption_message_queue_duration_seconds_count 12.0" in exposition
    assert unavailable.is_unavailable(
        capacity_type="spot", instance_type="c5.large", zone="us-west-2b"
    )


# ------------------------------------------------------------------ decisions and settings


@pytest.mark.parametrize(
    ("body", "reason", "kind"),
    [
        pytest.param(SPOT, "SpotInterrupted", "spot_interrupted", id="spot"),
        pytest.param(REBALANCE, "SpotRebalanceRecommendation", "rebalance_recommendation", id="rb"),
        pytest.param(SCHEDULED, "InstanceUnhealthy", "scheduled_change", id="scheduled"),
        pytest.param(STOPPING, "InstanceStopping", "instance_stopped", id="stopping"),
        pytest.param(_state("terminated"), "InstanceTerminating", "instance_terminated", id="term"),
        pytest.param(RESERVATION, None, "capacity_reservation_interrupted", id="reservation"),
        pytest.param(RUNNING, None, "no_op", id="running"),
    ],
)
def test_karpenters_event_and_metric_reason_per_kind(
    body: dict[str, Any], reason: str | None, kind: str
) -> None:
    event = parse_event(body)
    notice = notice_for(event)
    assert (notice.reason if notice else None, message_kind(event)) == (reason, kind)


@pytest.mark.parametrize(
    "queue",
    [
        pytest.param("karpy-interruptions", id="name"),
        pytest.param("events.fifo", id="fifo-name"),
        pytest.param("https://sqs.us-west-2.amazonaws.com/123456789012/karpy", id="url"),
    ],
)
def test_the_queue_setting_takes_a_name_or_a_url(queue: str) -> None:
    options = AWSProviderOptions.from_settings({"region": REGION, "interruption-queue": queue})
    assert options.interruption_queue == queue
    assert AWSProviderOptions.from_settings({"region": REGION}).interruption_queue is None


@pytest.mark.parametrize(
    "queue",
    [
        pytest.param("", id="empty"),
        pytest.param("my queue", id="space"),
        pytest.param("x" * 81, id="too-long"),
        pytest.param("https://sqs.us-west-2.amazonaws.com/karpy", id="url-without-account"),
        pytest.param("https:///123456789012/karpy", id="url-without-host"),
    ],
)
def test_a_malformed_queue_setting_is_refused(queue: str) -> None:
    with pytest.raises(ProviderConfigError, match="'interruption-queue'"):
        AWSProviderOptions.from_settings({"region": REGION, "interruption-queue": queue})


async def test_a_capacity_reservation_interruption_marks_the_reservation_full(
    kube: KubeClient,
    session: AWSSession,
    faults: FaultInjector,
    moto: Moto,
    queue: Queue,
    cleanup: list[str],
) -> None:
    claim = await _claim(kube, cleanup)
    reservation = boto_client(moto, "ec2").create_capacity_reservation(
        InstanceType="c5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-west-2b",
        InstanceCount=2,
    )["CapacityReservation"]["CapacityReservationId"]
    reservations = ReservationAvailability(await session.client("ec2"), FakeClock())
    await reservations.refresh([reservation])
    assert reservations.available(reservation) == 2
    body = _for(RESERVATION, claim.instance_id)
    body["detail"]["capacity-reservation-id"] = reservation
    queue.send(body)
    async with _controller(kube, session, queue, reservations=reservations):
        await eventually(deletions(faults, 1), what="the message to be handled")
    assert reservations.available(reservation) == 0  # nothing more launches into it
    assert await _deleting(kube, claim)
