"""The session: loopback-only endpoints, spans on every call, typed errors, botocore retries."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from karpy_aws import errors
from karpy_aws.session import AWSSession, AWSSettings, RetryMode

from .conftest import REGION, FaultInjector, Moto

pytestmark = pytest.mark.aws


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param(None, id="no-endpoint"),
        pytest.param("https://ec2.us-west-2.amazonaws.com", id="aws"),
        pytest.param("http://10.0.0.1:5000", id="private-ip"),
        pytest.param("http://127.0.0.1.example.com:5000", id="lookalike-host"),
    ],
)
def test_loopback_flag_refuses_every_non_loopback_endpoint(endpoint: str | None) -> None:
    with pytest.raises(errors.ConfigurationError, match="require_loopback_endpoint"):
        AWSSettings(region=REGION, endpoint_url=endpoint, require_loopback_endpoint=True)


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param("http://127.0.0.1:5000", id="v4"),
        pytest.param("http://[::1]:5000", id="v6"),
        pytest.param("http://localhost:5000", id="name"),
    ],
)
def test_loopback_flag_accepts_loopback(endpoint: str) -> None:
    assert AWSSettings(region=REGION, endpoint_url=endpoint, require_loopback_endpoint=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"max_attempts": 0}, "max_attempts", id="attempts"),
        pytest.param({"call_timeout": -1.0}, "call_timeout", id="timeout"),
        pytest.param({"endpoint_url": "ftp://x"}, "endpoint_url", id="scheme"),
        pytest.param({"region": ""}, "region", id="region"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    values: dict[str, object] = {"region": REGION, **kwargs}
    with pytest.raises(errors.ConfigurationError, match=field):
        AWSSettings(**values)  # type: ignore[arg-type]


async def test_every_call_gets_a_client_span(
    session: AWSSession, spans: InMemorySpanExporter
) -> None:
    ec2 = await session.client("ec2")
    await ec2.call("DescribeAvailabilityZones")
    (span,) = spans.get_finished_spans()
    assert span.name == "aws.ec2.DescribeAvailabilityZones"
    assert span.attributes is not None
    assert span.attributes["rpc.system"] == "aws-api"
    assert span.attributes["rpc.service"] == "EC2"
    assert span.attributes["rpc.method"] == "DescribeAvailabilityZones"
    assert span.attributes["aws.region"] == REGION
    assert span.attributes["http.response.status_code"] == 200
    assert span.status.status_code is not StatusCode.ERROR


async def test_client_errors_become_typed_errors_with_code_on_span(
    session: AWSSession, spans: InMemorySpanExporter
) -> None:
    ec2 = await session.client("ec2")
    with pytest.raises(errors.NotFoundError) as caught:
        await ec2.call("DescribeInstances", InstanceIds=["i-0123456789abcdef0"])
    assert caught.value.code == "InvalidInstanceID.NotFound"
    assert caught.value.operation == "DescribeInstances"
    assert type(caught.value.__cause__).__module__.startswith("botocore")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["aws.error_code"] == "InvalidInstanceID.NotFound"


@pytest.mark.parametrize("mode", [pytest.param("standard"), pytest.param("adaptive")])
async def test_throttling_is_retried_by_botocore_then_succeeds(
    moto: Moto, faults: FaultInjector, mode: RetryMode
) -> None:
    settings = AWSSettings(
        region=REGION,
        endpoint_url=moto.endpoint,
        require_loopback_endpoint=True,
        max_attempts=3,
        retry_mode=mode,
    )
    faults.fail("DescribeSubnets", "RequestLimitExceeded", status=503, times=1)
    async with AWSSession(settings, hooks=faults.hooks()) as session:
        ec2 = await session.client("ec2")
        result = await ec2.call("DescribeSubnets")
    assert result["Subnets"]
    assert result["ResponseMetadata"]["RetryAttempts"] == 1
    assert faults.sent.count("DescribeSubnets") == 2


async def test_throttling_past_max_attempts_raises_throttled(
    session: AWSSession, faults: FaultInjector
) -> None:
    faults.fail("DescribeSubnets", "RequestLimitExceeded", status=503)
    ec2 = await session.client("ec2")
    with pytest.raises(errors.ThrottledError, match="RequestLimitExceeded"):
        await ec2.call("DescribeSubnets")
    assert faults.sent.count("DescribeSubnets") == 1  # max_attempts=1 in the fixture


async def test_unreachable_endpoint_is_service_unavailable() -> None:
    settings = AWSSettings(
        region=REGION,
        endpoint_url="http://127.0.0.1:9",
        require_loopback_endpoint=True,
        max_attempts=1,
        connect_timeout=2.0,
    )
    async with AWSSession(settings) as session:
        ec2 = await session.client("ec2")
        with pytest.raises(errors.ServiceUnavailableError):
            await ec2.call("DescribeSubnets")


async def test_client_before_enter_is_refused(settings: AWSSettings) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await AWSSession(settings).client("ec2")


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        pytest.param(
            "InsufficientInstanceCapacity", 400, errors.InsufficientCapacityError, id="ice"
        ),
        pytest.param("VcpuLimitExceeded", 400, errors.InsufficientCapacityError, id="vcpu"),
        pytest.param("UnauthorizedOperation", 403, errors.AccessDeniedError, id="denied"),
        pytest.param("InvalidParameterValue", 400, errors.InvalidRequestError, id="invalid"),
        pytest.param("InternalError", 500, errors.ServiceUnavailableError, id="5xx"),
        pytest.param("Foo.NotFound", 400, errors.NotFoundError, id="notfound-suffix"),
        pytest.param(
            "InvalidLaunchTemplateName.AlreadyExistsException",
            400,
            errors.AlreadyExistsError,
            id="exists",
        ),
    ],
)
def test_error_codes_map_to_kinds(code: str, status: int, kind: type[errors.AWSError]) -> None:
    err = errors.error_for_code(
        service="ec2", operation="CreateFleet", code=code, message="m", status=status
    )
    assert type(err) is kind
    assert code in str(err)


async def test_paginate_follows_tokens_with_one_span_per_page(
    session: AWSSession, faults: FaultInjector, spans: InMemorySpanExporter
) -> None:
    faults.answer(
        "DescribeSubnets",
        {"Subnets": [{"SubnetId": "subnet-1"}], "NextToken": "page-2"},
        {"Subnets": [{"SubnetId": "subnet-2"}]},
    )
    ec2 = await session.client("ec2")
    items = await ec2.paginate("DescribeSubnets", result_key="Subnets")
    assert [i["SubnetId"] for i in items] == ["subnet-1", "subnet-2"]
    assert [s.name for s in spans.get_finished_spans()] == ["aws.ec2.DescribeSubnets"] * 2


async def test_paginate_refuses_a_token_loop(session: AWSSession, faults: FaultInjector) -> None:
    faults.answer("DescribeSubnets", {"Subnets": [], "NextToken": "same"})
    ec2 = await session.client("ec2")
    with pytest.raises(errors.ServiceUnavailableError, match="PaginationLoop"):
        await ec2.paginate("DescribeSubnets", result_key="Subnets")
