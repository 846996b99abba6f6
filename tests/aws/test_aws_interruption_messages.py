"""EventBridge interruption messages, parsed purely: every kind Karpenter acts on, the ones it
ignores, and malformed bodies as typed errors."""

from __future__ import annotations

import datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy_aws.controllers.interruption.messages import (
    Action,
    InterruptionKind,
    MessageParseError,
    UnsupportedMessageError,
    parse_message,
)

ACCOUNT = "123456789012"
TIME = "2026-03-14T09:26:53Z"
WHEN = datetime.datetime(2026, 3, 14, 9, 26, 53, tzinfo=datetime.UTC)


def _event(source: str, detail_type: str, detail: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": TIME,
        "region": "us-west-2",
        "resources": ["arn:aws:ec2:us-west-2:123456789012:instance/i-0b662ef9931388ba0"],
        "detail": detail,
        **extra,
    }


SPOT = _event(
    "aws.ec2",
    "EC2 Spot Instance Interruption Warning",
    {"instance-id": "i-0b662ef9931388ba0", "instance-action": "terminate"},
)
REBALANCE = _event(
    "aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "i-0b662ef9931388ba0"}
)
STOPPING = _event(
    "aws.ec2",
    "EC2 Instance State-change Notification",
    {"instance-id": "i-0b662ef9931388ba0", "state": "stopping"},
)
RUNNING = _event(
    "aws.ec2",
    "EC2 Instance State-change Notification",
    {"instance-id": "i-0b662ef9931388ba0", "state": "running"},
)
SCHEDULED = _event(
    "aws.health",
    "AWS Health Event",
    {
        "eventArn": "arn:aws:health:us-west-2::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT"
        "_SCHEDULED/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED_123",
        "service": "EC2",
        "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "startTime": "Sat, 14 Mar 2026 12:00:00 GMT",
        "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
        "affectedEntities": [
            {"entityValue": "i-0b662ef9931388ba0"},
            {"entityValue": "i-05f1f3bd2d1c4e7a9"},
        ],
    },
)
RESERVATION = _event(
    "aws.ec2",
    "EC2 Capacity Reservation Instance Interruption Warning",
    {
        "capacity-reservation-id": "cr-0a1b2c3d4e5f67890",
        "instance-ids": ["i-0b662ef9931388ba0", "i-05f1f3bd2d1c4e7a9"],
    },
)
BOTH = ("i-05f1f3bd2d1c4e7a9", "i-0b662ef9931388ba0")


@pytest.mark.parametrize(
    ("event", "kind", "instances", "action", "extra"),
    [
        pytest.param(
            SPOT,
            InterruptionKind.SPOT_INTERRUPTION,
            ("i-0b662ef9931388ba0",),
            Action.CORDON_AND_DRAIN,
            {},
            id="spot-interruption",
        ),
        pytest.param(
            REBALANCE,
            InterruptionKind.REBALANCE_RECOMMENDATION,
            ("i-0b662ef9931388ba0",),
            Action.NONE,
            {},
            id="rebalance-is-event-only",
        ),
        pytest.param(
            STOPPING,
            InterruptionKind.STATE_CHANGE,
            ("i-0b662ef9931388ba0",),
            Action.CORDON_AND_DRAIN,
            {"state": "stopping"},
            id="state-change-stopping",
        ),
        pytest.param(
            RUNNING,
            InterruptionKind.STATE_CHANGE,
            ("i-0b662ef9931388ba0",),
            Action.NONE,
            {"state": "running"},
            id="state-change-running-is-no-interruption",
        ),
        pytest.param(
            SCHEDULED,
            InterruptionKind.SCHEDULED_CHANGE,
            BOTH,
            Action.CORDON_AND_DRAIN,
            {},
            id="scheduled-change",
        ),
        pytest.param(
            RESERVATION,
            InterruptionKind.CAPACITY_RESERVATION_INTERRUPTION,
            BOTH,
            Action.CORDON_AND_DRAIN,
            {"capacity_reservation_id": "cr-0a1b2c3d4e5f67890"},
            id="capacity-reservation",
        ),
    ],
)
def test_interruptions_parse_into_events(
    event: dict[str, Any],
    kind: InterruptionKind,
    instances: tuple[str, ...],
    action: Action,
    extra: dict[str, str],
) -> None:
    parsed = parse_message(orjson.dumps(event))
    assert parsed.kind is kind
    assert parsed.instance_ids == instances
    assert parsed.action is action
    assert parsed.id == "7bf73129-1428-4cd3-a780-95db273d1602"
    assert parsed.time == WHEN
    assert parsed.region == "us-west-2"
    for field, value in extra.items():
        assert getattr(parsed, field) == value


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        pytest.param(b"{not json", MessageParseError, "not JSON", id="not-json"),
        pytest.param(b"[1, 2]", MessageParseError, "JSON list, not an object", id="array"),
        pytest.param(
            orjson.dumps({**SPOT, "detail": {"instance-action": "terminate"}}),
            MessageParseError,
            "no instance id",
            id="no-instance",
        ),
        pytest.param(
            orjson.dumps({**SPOT, "time": "yesterday"}),
            MessageParseError,
            "'time' 'yesterday'",
            id="bad-time",
        ),
        pytest.param(
            orjson.dumps({k: v for k, v in SPOT.items() if k != "source"}),
            MessageParseError,
            "'source' must be a non-empty string",
            id="no-source",
        ),
        pytest.param(
            orjson.dumps({**STOPPING, "detail": {"instance-id": "i-0b662ef9931388ba0"}}),
            MessageParseError,
            "'state'",
            id="state-change-without-state",
        ),
        pytest.param(
            orjson.dumps(_event("aws.s3", "Object Created", {"bucket": {"name": "b"}})),
            UnsupportedMessageError,
            "'aws.s3'",
            id="other-service",
        ),
        pytest.param(
            orjson.dumps(
                {**SCHEDULED, "detail": {**SCHEDULED["detail"], "eventTypeCategory": "issue"}}
            ),
            UnsupportedMessageError,
            "only EC2 scheduledChange",
            id="health-issue",
        ),
    ],
)
def test_bad_messages_raise_typed_errors(
    body: bytes, error: type[MessageParseError], match: str
) -> None:
    with pytest.raises(error, match=match):
        parse_message(body)


def test_unsupported_is_a_parse_error_so_one_handler_deletes_both() -> None:
    assert issubclass(UnsupportedMessageError, MessageParseError)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_IDS = st.sampled_from(["i-0b662ef9931388ba0", "i-05f1f3bd2d1c4e7a9", "vol-1", ""]) | _JSON
_DETAILS = st.fixed_dictionaries(
    {},
    optional={
        "instance-id": _IDS,
        "instance-ids": st.lists(_IDS, max_size=3) | _JSON,
        "state": st.sampled_from(["stopping", "running", ""]) | _JSON,
        "capacity-reservation-id": st.sampled_from(["cr-1", ""]) | _JSON,
        "service": st.sampled_from(["EC2", "S3"]) | _JSON,
        "eventTypeCategory": st.sampled_from(["scheduledChange", "issue"]) | _JSON,
        "affectedEntities": st.lists(st.fixed_dictionaries({"entityValue": _IDS}), max_size=3)
        | _JSON,
    },
)
_EVENTS = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["aws.ec2", "aws.health", "aws.s3"]) | _JSON,
        "detail-type": st.sampled_from(
            [SPOT["detail-type"], STOPPING["detail-type"], SCHEDULED["detail-type"],
             RESERVATION["detail-type"], REBALANCE["detail-type"], "Other"]
        )
        | _JSON,
        "id": st.sampled_from(["e-1", ""]) | _JSON,
        "time": st.sampled_from([TIME, "2026-03-14T09:26:53+02:00", "soon"]) | _JSON,
        "region": st.just("us-west-2") | _JSON,
        "detail": _DETAILS | _JSON,
    },
)  # fmt: skip


@given(_EVENTS | _JSON)
def test_any_json_is_an_event_with_instances_or_a_typed_error(event: Any) -> None:
    body = orjson.dumps(event)
    try:
        parsed = parse_message(body)
    except MessageParseError as e:
        error: MessageParseError | None = e
    else:
        error = None
    if error is not None:
        assert str(error), "errors say what is wrong"
        return
    assert parsed.instance_ids
    assert all(i.startswith("i-") for i in parsed.instance_ids)
    assert parsed.time.tzinfo is not None
