"""EventBridge message bodies -> frozen InterruptionEvent values, or a typed error. Pure.

Karpenter acts on five kinds of event: spot interruption warnings (cordon and drain, and the
offering is taken out for a while), scheduled changes from AWS Health (cordon and drain), state
changes to stopping/stopped/shutting-down/terminated (cordon and drain), capacity-reservation
interruption warnings (cordon and drain), and rebalance recommendations (recorded, no action).
Anything else in the queue is not for us: it raises UnsupportedMessageError, and a body that is
not such an event at all raises MessageParseError; the caller logs either and deletes the
message, so one bad message never blocks the queue.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs
import orjson

SOURCE_EC2: Final = "aws.ec2"
SOURCE_HEALTH: Final = "aws.health"
# States worth draining for; "pending" and "running" changes are not interruptions.
INTERRUPTING_STATES: Final = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


class MessageParseError(ValueError):
    """The body is not an EventBridge event karpy can read (the message says what is wrong)."""


class UnsupportedMessageError(MessageParseError):
    """A well-formed event of a kind karpy does not act on (its source and detail-type)."""


class InterruptionKind(enum.StrEnum):
    """What AWS announced."""

    SPOT_INTERRUPTION = "SpotInterruption"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    SCHEDULED_CHANGE = "ScheduledChange"
    STATE_CHANGE = "StateChange"
    CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruption"


class Action(enum.StrEnum):
    """What the interruption controller should do about the event's instances."""

    CORDON_AND_DRAIN = "CordonAndDrain"
    NONE = "NoAction"


@attrs.frozen(kw_only=True)
class InterruptionEvent:
    """One parsed event. ``instance_ids`` are EC2 ids (``i-...``), sorted."""

    kind: InterruptionKind
    id: str
    time: datetime.datetime
    region: str
    instance_ids: tuple[str, ...]
    state: str | None = None
    """The new state, for state changes."""
    capacity_reservation_id: str | None = None
    """The reservation being reclaimed, for capacity-reservation interruptions."""

    @property
    def action(self) -> Action:
        """Karpenter's action: drain, except for rebalance recommendations and for state
        changes to states that do not interrupt."""
        if self.kind is InterruptionKind.REBALANCE_RECOMMENDATION:
            return Action.NONE
        if self.kind is InterruptionKind.STATE_CHANGE and self.state not in INTERRUPTING_STATES:
            return Action.NONE
        return Action.CORDON_AND_DRAIN


def _text(data: Mapping[str, Any], key: str, *, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise MessageParseError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    return value


def _detail(event: Mapping[str, Any]) -> Mapping[str, Any]:
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MessageParseError(f"event: 'detail' must be an object, got {type(detail).__name__}")
    return detail


def _time(event: Mapping[str, Any]) -> datetime.datetime:
    raw = _text(event, "time", where="event")
    try:
        parsed = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as e:
        raise MessageParseError(f"event: 'time' {raw!r} is not an RFC 3339 time") from e
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _instance_ids(detail: Mapping[str, Any], *, where: str) -> tuple[str, ...]:
    ids: list[Any] = []
    if "instance-id" in detail:
        ids.append(detail["instance-id"])
    raw_list = detail.get("instance-ids", [])
    ids.extend(raw_list if isinstance(raw_list, list) else [raw_list])
    if not ids or not all(isinstance(i, str) and i.startswith("i-") for i in ids):
        raise MessageParseError(f"{where}: no instance id (i-...) in {sorted(detail)}")
    return tuple(sorted(set(ids)))


def _health_instance_ids(detail: Mapping[str, Any]) -> tuple[str, ...]:
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise MessageParseError("AWS Health Event detail: 'affectedEntities' must be a list")
    ids = sorted(
        {
            e["entityValue"]
            for e in entities
            if isinstance(e, Mapping)
            and isinstance(e.get("entityValue"), str)
            and e["entityValue"].startswith("i-")
        }
    )
    if not ids:
        raise MessageParseError("AWS Health Event detail: no affected instance (i-...)")
    return tuple(ids)


_EC2_KINDS: Final = {
    "EC2 Spot Instance Interruption Warning": InterruptionKind.SPOT_INTERRUPTION,
    "EC2 Instance Rebalance Recommendation": InterruptionKind.REBALANCE_RECOMMENDATION,
    "EC2 Instance State-change Notification": InterruptionKind.STATE_CHANGE,
    "EC2 Capacity Reservation Instance Interruption Warning": (
        InterruptionKind.CAPACITY_RESERVATION_INTERRUPTION
    ),
}


def parse_event(event: Mapping[str, Any]) -> InterruptionEvent:
    """One decoded EventBridge event -> InterruptionEvent (see the module docstring)."""
    source = _text(event, "source", where="event")
    detail_type = _text(event, "detail-type", where="event")
    event_id = _text(event, "id", where="event")
    when = _time(event)
    region = str(event.get("region", ""))
    where = f"{detail_type!r} detail"
    if source == SOURCE_EC2 and detail_type in _EC2_KINDS:
        kind = _EC2_KINDS[detail_type]
        detail = _detail(event)
        state = None
        reservation = None
        if kind is InterruptionKind.STATE_CHANGE:
            state = _text(detail, "state", where=where)
        if kind is InterruptionKind.CAPACITY_RESERVATION_INTERRUPTION:
            reservation = _text(detail, "capacity-reservation-id", where=where)
        return InterruptionEvent(
            kind=kind,
            instance_ids=_instance_ids(detail, where=where),
            state=state,
            capacity_reservation_id=reservation,
            id=event_id,
            time=when,
            region=region,
        )
    if source == SOURCE_HEALTH and detail_type == "AWS Health Event":
        detail = _detail(event)
        service = detail.get("service")
        category = detail.get("eventTypeCategory")
        if service != "EC2" or category != "scheduledChange":
            raise UnsupportedMessageError(
                f"AWS Health Event for service {service!r}, category {category!r}: only EC2 "
                "scheduledChange events are acted on"
            )
        return InterruptionEvent(
            kind=InterruptionKind.SCHEDULED_CHANGE,
            instance_ids=_health_instance_ids(detail),
            id=event_id,
            time=when,
            region=region,
        )
    raise UnsupportedMessageError(
        f"event source {source!r} with detail-type {detail_type!r} is not an interruption"
    )


def parse_message(body: str | bytes) -> InterruptionEvent:
    """An SQS message body (EventBridge event JSON) -> InterruptionEvent.

    Raises MessageParseError (malformed) or UnsupportedMessageError (not an interruption).
    """
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MessageParseError(f"message body is not JSON: {e}") from e
    if not isinstance(event, Mapping):
        raise MessageParseError(f"message body is JSON {type(event).__name__}, not an object")
    return parse_event(event)
