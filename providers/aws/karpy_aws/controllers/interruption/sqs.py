"""The interruption queue: long-poll SQS for EventBridge messages, delete them once handled.

One SQS queue per cluster receives the EventBridge rules' events. Karpenter polls it with a
20 second long poll for up to 10 messages, hiding each for 20 seconds while it is handled, and
deletes every message it has handled — including ones it could not parse, so a bad message is
logged once instead of coming back forever. Calls go through the shared AWSClient (spans,
deadlines, botocore retries, typed errors).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

import attrs

from karpy_aws.controllers.interruption.messages import (
    InterruptionEvent,
    MessageParseError,
    parse_message,
)
from karpy_aws.session import AWSClient

WAIT_SECONDS: Final = 20
MAX_MESSAGES: Final = 10
VISIBILITY_TIMEOUT_SECONDS: Final = 20
# SQS queue names: 1-80 letters, digits, hyphens and underscores (".fifo" counts toward 80).
_QUEUE_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,75}(\.fifo)?|[A-Za-z0-9_-]{76,80}")
_URL_SCHEMES: Final = ("http", "https")


def check_queue(queue: str) -> str:
    """``queue`` if it is an SQS queue name or an ``http(s)://host/<account>/<name>`` queue URL;
    ValueError saying what is wrong otherwise. Pure."""
    parts = urlsplit(queue)
    if parts.scheme in _URL_SCHEMES:
        segments = parts.path.strip("/").split("/")
        if not parts.netloc or len(segments) != 2 or not segments[0].isdigit():
            msg = (
                f"{queue!r} is not a queue URL "
                "(https://sqs.<region>.amazonaws.com/<account>/<name>)"
            )
            raise ValueError(msg)
        name = segments[1]
    else:
        name = queue
    if not _QUEUE_NAME.fullmatch(name):
        msg = (
            f"{name!r} is not an SQS queue name (1-80 letters, digits, '-' and '_', "
            "optionally ending in '.fifo')"
        )
        raise ValueError(msg)
    return queue


@attrs.frozen(kw_only=True)
class ReceivedMessage:
    """One message: its event, or the typed error that says why it has none."""

    message_id: str
    receipt_handle: str
    event: InterruptionEvent | None
    error: MessageParseError | None = attrs.field(eq=False)


class SQSInterruptionQueue:
    """Receive and delete interruption messages on one queue."""

    def __init__(
        self,
        sqs: AWSClient,
        *,
        queue_url: str,
        wait_seconds: int = WAIT_SECONDS,
        max_messages: int = MAX_MESSAGES,
        visibility_timeout: int = VISIBILITY_TIMEOUT_SECONDS,
    ) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self._wait = wait_seconds
        self._max = max_messages
        self._visibility = visibility_timeout

    @classmethod
    async def named(cls, sqs: AWSClient, queue_name: str, **options: int) -> SQSInterruptionQueue:
        """The queue called ``queue_name`` (NotFoundError if there is none)."""
        response = await sqs.call("GetQueueUrl", QueueName=queue_name)
        return cls(sqs, queue_url=str(response["QueueUrl"]), **options)

    @classmethod
    async def resolve(cls, sqs: AWSClient, queue: str, **options: int) -> SQSInterruptionQueue:
        """The queue the ``interruption-queue`` setting names: a queue URL as given, a queue
        name looked up with :meth:`named`."""
        if urlsplit(queue).scheme in _URL_SCHEMES:
            return cls(sqs, queue_url=queue, **options)
        return await cls.named(sqs, queue, **options)

    async def receive(self) -> tuple[ReceivedMessage, ...]:
        """Wait up to the long-poll time for messages; parse each (never raises for a bad
        body: the error is in the ReceivedMessage). Raises karpy_aws.errors.AWSError if SQS
        fails."""
        response = await self._sqs.call(
            "ReceiveMessage",
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self._max,
            WaitTimeSeconds=self._wait,
            VisibilityTimeout=self._visibility,
        )
        out = []
        for raw in response.get("Messages", []):
            event: InterruptionEvent | None = None
            error: MessageParseError | None = None
            try:
                event = parse_message(str(raw.get("Body", "")))
            except MessageParseError as e:
                error = e
            out.append(
                ReceivedMessage(
                    message_id=str(raw["MessageId"]),
                    receipt_handle=str(raw["ReceiptHandle"]),
                    event=event,
                    error=error,
                )
            )
        return tuple(out)

    async def delete(self, message: ReceivedMessage) -> None:
        """Remove a handled message from the queue."""
        await self._sqs.call(
            "DeleteMessage", QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle
        )
