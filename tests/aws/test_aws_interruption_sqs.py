"""The interruption queue on moto's SQS: long-poll parameters, parsed events, bad messages
surfaced as typed errors, and deletion."""

from __future__ import annotations

import secrets

import orjson
import pytest

from karpy_aws.controllers.interruption.messages import InterruptionKind, MessageParseError
from karpy_aws.controllers.interruption.sqs import SQSInterruptionQueue
from karpy_aws.errors import NotFoundError
from karpy_aws.session import AWSSession

from .conftest import FaultInjector, Moto, boto_client
from .test_aws_interruption_messages import SPOT, STOPPING

pytestmark = pytest.mark.aws


@pytest.fixture
def queue_name(moto: Moto) -> str:
    name = f"interruptions-{secrets.token_hex(4)}"
    boto_client(moto, "sqs").create_queue(QueueName=name)
    return name


async def test_messages_are_received_parsed_and_deleted(
    session: AWSSession, moto: Moto, queue_name: str, faults: FaultInjector
) -> None:
    sync = boto_client(moto, "sqs")
    url = sync.get_queue_url(QueueName=queue_name)["QueueUrl"]
    for body in (orjson.dumps(SPOT).decode(), orjson.dumps(STOPPING).decode(), "not json"):
        sync.send_message(QueueUrl=url, MessageBody=body)
    queue = await SQSInterruptionQueue.named(await session.client("sqs"), queue_name)
    received = await queue.receive()
    assert faults.requests["ReceiveMessage"][-1] == {
        "QueueUrl": url,
        "MaxNumberOfMessages": 10,
        "WaitTimeSeconds": 20,
        "VisibilityTimeout": 20,
    }
    kinds = sorted(m.event.kind for m in received if m.event is not None)
    assert kinds == [InterruptionKind.SPOT_INTERRUPTION, InterruptionKind.STATE_CHANGE]
    (bad,) = [m for m in received if m.event is None]
    assert isinstance(bad.error, MessageParseError)
    assert "not JSON" in str(bad.error)
    for message in received:
        await queue.delete(message)
    short = SQSInterruptionQueue(await session.client("sqs"), queue_url=url, wait_seconds=0)
    assert await short.receive() == ()
    attributes = sync.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


async def test_an_unknown_queue_is_not_found(session: AWSSession) -> None:
    with pytest.raises(NotFoundError):
        await SQSInterruptionQueue.named(await session.client("sqs"), "no-such-queue")
