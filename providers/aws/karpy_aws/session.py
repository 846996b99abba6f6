"""One place where aiobotocore clients are made and every AWS call passes through.

Every call karpy makes to AWS goes through :meth:`AWSClient.call`, which gives it four things the
rest of the package must not re-implement: a span (``aws.<service>.<Operation>``), a deadline
(``asyncio.timeout``), botocore's own retry policy (standard or adaptive, never a hand loop), and
translation of botocore failures into :mod:`karpy_aws.errors`. Endpoints are configurable so tests
can point at moto's server; ``require_loopback_endpoint`` refuses any endpoint that is not on this
machine, so a test run can never reach real AWS by mistake.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import attrs
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError
from opentelemetry import trace

from karpy_aws.errors import (
    AWSError,
    CallTimeoutError,
    ConfigurationError,
    ServiceUnavailableError,
    error_for_code,
)

RetryMode = Literal["standard", "adaptive"]
ServiceName = Literal["ec2", "ssm", "pricing", "iam", "sqs", "eks", "sts"]

RPC_SYSTEM: Final = "aws-api"
_LOOPBACK_NAMES: Final = frozenset({"localhost"})


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise ConfigurationError(f"aws settings: {attribute.name} must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class AWSSettings:
    """How to reach AWS. Every field has a default except the region."""

    region: str
    """The region all regional clients use (``topology.kubernetes.io/region`` of the nodes)."""
    endpoint_url: str | None = None
    """Override for every service's endpoint (moto in tests); None means AWS's own endpoints."""
    require_loopback_endpoint: bool = False
    """Refuse to start unless ``endpoint_url`` is set and points at a loopback address. Tests set
    it so that nothing can reach real AWS."""
    retry_mode: RetryMode = "standard"
    """botocore retry mode: "standard" (exponential backoff with jitter, retry quota) or
    "adaptive" (standard plus client-side rate limiting when throttled)."""
    max_attempts: int = attrs.field(default=3, validator=_positive)
    """Total attempts per call including the first (botocore's total_max_attempts)."""
    connect_timeout: float = attrs.field(default=5.0, validator=_positive)
    """Seconds to open a connection."""
    read_timeout: float = attrs.field(default=30.0, validator=_positive)
    """Seconds to wait for a response on an open connection."""
    call_timeout: float = attrs.field(default=120.0, validator=_positive)
    """Deadline in seconds for one logical call, retries and backoff included."""
    max_pool_connections: int = attrs.field(default=50, validator=_positive)
    """Connections per client; launches burst, so this is above botocore's default of 10."""

    def __attrs_post_init__(self) -> None:
        if not self.region:
            raise ConfigurationError("aws settings: region must not be empty")
        if self.endpoint_url is not None:
            parts = urlsplit(self.endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigurationError(
                    f"aws settings: endpoint_url {self.endpoint_url!r} is not an http(s) URL"
                )
        if self.require_loopback_endpoint and not is_loopback(self.endpoint_url):
            raise ConfigurationError(
                "aws settings: require_loopback_endpoint is set, so endpoint_url must point at "
                f"127.0.0.1, ::1 or localhost; got {self.endpoint_url!r}"
            )


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names this machine (127.0.0.0/8, ::1 or localhost)."""
    if url is None:
        return False
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@attrs.frozen
class EventHook:
    """A botocore event handler registered on every client (e.g. ``before-send.ec2.CreateFleet``).

    This is botocore's own extension point; tests use it to inject faults in front of moto.
    """

    event: str
    handler: Callable[..., Any]


class AWSClient:
    """One service's client. Only :meth:`call` and :meth:`paginate` talk to AWS."""

    def __init__(
        self,
        raw: Any,
        service: str,
        *,
        region: str,
        tracer: trace.Tracer,
        call_timeout: float,
    ) -> None:
        self._raw = raw
        self.service = service
        self.region = region
        self._tracer = tracer
        self._call_timeout = call_timeout
        self._service_id: str = raw.meta.service_model.service_id

    async def call(self, operation: str, /, **params: Any) -> dict[str, Any]:
        """Make one API call (``operation`` in AWS spelling, e.g. "DescribeSubnets").

        Opens a span, applies the deadline, lets botocore retry, and raises only
        :class:`karpy_aws.errors.AWSError` subclasses. Returns the parsed response.
        """
        method = getattr(self._raw, xform_name(operation))
        with self._tracer.start_as_current_span(
            f"aws.{self.service}.{operation}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "rpc.system": RPC_SYSTEM,
                "rpc.service": self._service_id,
                "rpc.method": operation,
                "aws.region": self.region,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                async with asyncio.timeout(self._call_timeout):
                    response: dict[str, Any] = await method(**params)
            except ClientError as e:
                err = e.response.get("Error", {})
                meta = e.response.get("ResponseMetadata", {})
                translated = error_for_code(
                    service=self.service,
                    operation=operation,
                    code=str(err.get("Code") or "Unknown"),
                    message=str(err.get("Message") or ""),
                    status=int(meta.get("HTTPStatusCode") or 0),
                )
                _fail(span, translated, meta=meta)
                raise translated from e
            except BotoCoreError as e:
                translated = ServiceUnavailableError(
                    service=self.service,
                    operation=operation,
                    code=type(e).__name__,
                    message=str(e),
                )
                _fail(span, translated, meta={})
                raise translated from e
            except TimeoutError as e:
                translated = CallTimeoutError(
                    service=self.service,
                    operation=operation,
                    code="CallTimeout",
                    message=f"no answer within {self._call_timeout}s",
                )
                _fail(span, translated, meta={})
                raise translated from e
            _annotate(span, response.get("ResponseMetadata", {}))
            return response

    async def paginate(
        self,
        operation: str,
        /,
        *,
        result_key: str,
        cursor_in: str = "NextToken",
        cursor_out: str = "NextToken",
        **params: Any,
    ) -> list[Any]:
        """Call ``operation`` until the service stops returning a token; concatenate
        ``result_key`` over all pages. Each page is its own :meth:`call` (own span, own retries).
        A service that hands back a token it already gave raises ServiceUnavailableError
        instead of looping forever.
        """
        items: list[Any] = []
        token: str | None = None
        seen: set[str] = set()
        while True:
            page_params = dict(params)
            if token:
                page_params[cursor_in] = token
            page = await self.call(operation, **page_params)
            items.extend(page.get(result_key, []))
            token = page.get(cursor_out)
            if not token:
                return items
            if token in seen:
                raise ServiceUnavailableError(
                    service=self.service,
                    operation=operation,
                    code="PaginationLoop",
                    message=f"the service returned {cursor_out} {token!r} twice",
                )
            seen.add(token)


def _annotate(span: trace.Span, meta: dict[str, Any]) -> None:
    if "RequestId" in meta:
        span.set_attribute("aws.request_id", str(meta["RequestId"]))
    if "HTTPStatusCode" in meta:
        span.set_attribute("http.response.status_code", int(meta["HTTPStatusCode"]))
    if "RetryAttempts" in meta:
        span.set_attribute("aws.retry_attempts", int(meta["RetryAttempts"]))


def _fail(span: trace.Span, error: AWSError, *, meta: dict[str, Any]) -> None:
    _annotate(span, meta)
    span.set_attribute("error.type", error.code)
    span.set_attribute("aws.error_code", error.code)
    span.set_status(trace.Status(trace.StatusCode.ERROR, error.code))


class AWSSession:
    """Owns the aiobotocore clients for one process; use as ``async with AWSSession(...)``.

    Clients are created on first use and closed when the session exits. Construct it only in the
    composition root and pass it (or its clients) to the collaborators that need AWS.
    """

    def __init__(
        self,
        settings: AWSSettings,
        *,
        tracer: trace.Tracer | None = None,
        hooks: Sequence[EventHook] = (),
    ) -> None:
        self.settings = settings
        self._tracer = tracer if tracer is not None else trace.get_tracer("karpy_aws")
        self._hooks = tuple(hooks)
        self._session = get_session()
        self._stack = contextlib.AsyncExitStack()
        self._clients: dict[tuple[str, str, float], AWSClient] = {}
        self._lock = asyncio.Lock()
        self._open = False

    async def __aenter__(self) -> AWSSession:
        await self._stack.__aenter__()
        self._open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every client (also what leaving ``async with`` does)."""
        self._open = False
        self._clients.clear()
        await self._stack.aclose()

    def _config(self, read_timeout: float) -> Any:
        s = self.settings
        return AioConfig(
            retries={"mode": s.retry_mode, "total_max_attempts": s.max_attempts},
            connect_timeout=s.connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=s.max_pool_connections,
            user_agent_extra="karpy",
        )

    async def client(
        self,
        service: ServiceName,
        *,
        region: str | None = None,
        read_timeout: float | None = None,
    ) -> AWSClient:
        """The client for ``service`` in ``region`` (default: the settings' region).

        ``read_timeout`` (None: the settings') is for calls whose answer is large and slow to
        build, such as the whole instance-type catalog: an attempt abandoned at the read
        timeout is retried from the start, which the endpoint builds again, so a timeout
        shorter than the build never gets an answer and only adds load. Such a client's call
        deadline is that long wait plus the settings' ``call_timeout``.
        """
        if not self._open:
            raise RuntimeError("AWSSession is not open: use it as 'async with AWSSession(...)'")
        if read_timeout is not None and read_timeout <= 0:
            raise ConfigurationError(f"aws client: read_timeout must be > 0, got {read_timeout!r}")
        region = region or self.settings.region
        wait = self.settings.read_timeout if read_timeout is None else read_timeout
        key = (service, region, wait)
        async with self._lock:
            if key not in self._clients:
                raw = await self._stack.enter_async_context(
                    self._session.create_client(
                        service,
                        region_name=region,
                        endpoint_url=self.settings.endpoint_url,
                        config=self._config(wait),
                    )
                )
                for hook in self._hooks:
                    raw.meta.events.register(hook.event, hook.handler)
                self._clients[key] = AWSClient(
                    raw,
                    service,
                    region=region,
                    tracer=self._tracer,
                    call_timeout=self.settings.call_timeout
                    + (0.0 if read_timeout is None else read_timeout),
                )
            return self._clients[key]
