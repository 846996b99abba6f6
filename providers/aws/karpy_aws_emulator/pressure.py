"""AWS under pressure, played by moto: throttling, failing calls and pools without capacity.

moto answers every call it knows, at once, forever; AWS does not. It throttles an account that
calls too often (``RequestLimitExceeded``), fails a call now and then, and runs out of capacity
in a pool (CreateFleet reports ``InsufficientInstanceCapacity`` for that override and launches
from the others). The tests' botocore hooks (``tests/aws/conftest.py``) inject such answers into
one client in the test's own process; karpy run as a process of its own (the end-to-end tier,
``benchmarks/faults.py``) has to meet them at the server. This module is that server side:

* a WSGI layer in front of moto that answers chosen calls with chosen errors, in the protocol
  of the service that was called (EC2's XML, the other query services' XML, the JSON services'
  ``__type``), for a fraction of calls within a time window, and records every call it sees
  (when, which service and operation, what it answered) so a test can measure the request rate
  of the client under pressure;
* a wrap of moto's CreateFleet that takes the overrides of pools without capacity out of the
  request and reports them in the answer's ``Errors``, as EC2 does.

The plan is set, and the records read, over HTTP at ``/karpy-emulator/pressure`` on moto's own
endpoint (``PUT`` a JSON plan, ``GET`` the records, ``DELETE`` to clear both), so a test or a
benchmark in another process drives it like any client. A plan::

    {"seed": 7,
     "rules": [{"caller": "AKIAKARPY", "service": "*", "operation": "*",
                "code": "RequestLimitExceeded", "status": 503, "fraction": 0.5,
                "start": 0, "end": 60},
               {"service": "ec2", "operation": "DescribeInstanceTypes",
                "code": "InternalError", "status": 500, "fraction": 1.0, "end": 15},
               {"operation": "DescribeInstanceTypes", "delay": 40}],
     "ice": [{"instanceType": "m5.large", "zone": "*", "capacityType": "spot"}]}

``caller`` is the access key id the call was signed with (``*``, the default: anyone's), so
a plan can press karpy and spare the bridge beside it. ``delay`` holds the answer back that many
seconds, as an endpoint building a large answer on a busy machine does; a rule with a delay and
no ``code`` then lets moto answer. Times are seconds since the plan was
set; the first rule that matches a call and draws it
answers. Without a plan (the default) nothing changes.
"""

from __future__ import annotations

import functools
import io
import json
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import parse_qs

import attrs

PATH: Final = "/karpy-emulator/pressure"
"""Where the plan is set and the records are read, on moto's endpoint."""
ANY: Final = "*"
ICE_MESSAGE: Final = "There is no capacity available that matches your request."

_CREDENTIAL = re.compile(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/")

Call = tuple[str, str, str]
"""Who called (the access key id), which service, which operation."""
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@attrs.frozen(kw_only=True)
class Rule:
    """Answer calls of ``service``/``operation`` (``*`` for any) made with access key
    ``caller`` (``*``: anyone's) with error ``code`` (HTTP ``status``), a ``fraction`` of them,
    from ``start`` to ``end`` seconds into the plan, ``delay`` seconds late (no ``code``: moto's
    own answer, late)."""

    code: str = ""
    caller: str = ANY
    service: str = ANY
    operation: str = ANY
    status: int = 400
    fraction: float = 1.0
    start: float = 0.0
    end: float | None = None
    delay: float = 0.0

    def __attrs_post_init__(self) -> None:
        if not self.code and self.delay <= 0:
            msg = "a rule needs a code, a delay > 0, or both"
            raise ValueError(msg)

    def covers(self, call: Call, at: float) -> bool:
        caller, service, operation = call
        return (
            self.caller in (ANY, caller)
            and self.service in (ANY, service)
            and self.operation in (ANY, operation)
            and at >= self.start
            and (self.end is None or at < self.end)
        )


@attrs.frozen(kw_only=True)
class Pool:
    """An offering without capacity: ``instance_type`` in ``zone``, for ``capacity_type``
    (``*`` for any)."""

    instance_type: str
    zone: str = ANY
    capacity_type: str = ANY

    def holds(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (
            self.instance_type in (ANY, instance_type)
            and self.zone in (ANY, zone)
            and self.capacity_type in (ANY, capacity_type)
        )


@attrs.frozen(kw_only=True)
class Record:
    """One call the layer saw: ``at`` seconds into the plan, and the error it answered (empty
    when moto answered)."""

    at: float
    caller: str
    service: str
    operation: str
    injected: str = ""


@attrs.frozen(kw_only=True)
class Plan:
    rules: tuple[Rule, ...] = ()
    ice: tuple[Pool, ...] = ()
    seed: int = 0

    @classmethod
    def parse(cls, document: Mapping[str, Any]) -> Plan:
        """A plan from its JSON form (the module docstring); ValueError names a bad field."""
        try:
            rules = tuple(
                Rule(
                    code=str(r.get("code", "")),
                    caller=str(r.get("caller", ANY)),
                    service=str(r.get("service", ANY)),
                    operation=str(r.get("operation", ANY)),
                    status=int(r.get("status", 400)),
                    fraction=float(r.get("fraction", 1.0)),
                    start=float(r.get("start", 0.0)),
                    end=None if r.get("end") is None else float(r["end"]),
                    delay=float(r.get("delay", 0.0)),
                )
                for r in document.get("rules", ())
            )
            ice = tuple(
                Pool(
                    instance_type=str(p["instanceType"]),
                    zone=str(p.get("zone", ANY)),
                    capacity_type=str(p.get("capacityType", ANY)),
                )
                for p in document.get("ice", ())
            )
            return cls(rules=rules, ice=ice, seed=int(document.get("seed", 0)))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"pressure plan: {error!r}") from error


class Pressure:
    """The plan in force and the records of the calls since it was set (thread-safe: moto
    serves each request on a thread of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plan = Plan()
        self._since = time.monotonic()
        self._random = random.Random(0)  # noqa: S311 - a reproducible draw, not a secret
        self._records: list[Record] = []

    def set(self, plan: Plan) -> None:
        with self._lock:
            self._plan = plan
            self._since = time.monotonic()
            self._random = random.Random(plan.seed)  # noqa: S311 - a reproducible draw
            self._records = []

    def clear(self) -> None:
        self.set(Plan())

    def decide(self, call: Call) -> Rule | None:
        """The rule that answers this call instead of moto, if any; records the call."""
        with self._lock:
            at = time.monotonic() - self._since
            chosen = None
            for rule in self._plan.rules:
                if rule.covers(call, at) and self._random.random() < rule.fraction:
                    chosen = rule
                    break
            self._records.append(
                Record(
                    at=round(at, 4),
                    caller=call[0],
                    service=call[1],
                    operation=call[2],
                    injected=chosen.code if chosen else "",
                )
            )
            return chosen

    def unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        with self._lock:
            return any(p.holds(instance_type, zone, capacity_type) for p in self._plan.ice)

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {"records": [attrs.asdict(r) for r in self._records]}


PRESSURE: Final = Pressure()
"""The emulator's one plan (moto's state is per process, and so is this)."""


# ------------------------------------------------------------------ the WSGI layer


def layer(app: WSGIApp, pressure: Pressure = PRESSURE) -> WSGIApp:
    """``app`` (moto) behind the pressure plan, and the plan's HTTP endpoint beside it."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == PATH:
            return _control(environ, start_response, pressure)
        body = _body(environ)
        call = _called(environ, body)
        rule = pressure.decide(call)
        if rule is not None and rule.delay > 0:
            time.sleep(rule.delay)  # this request's own server thread
        if rule is None or not rule.code:
            return app(environ, start_response)
        status, headers, payload = error_response(environ, call[1], rule.code, rule.status)
        start_response(status, headers)
        return [payload]

    return serve


def _body(environ: dict[str, Any]) -> bytes:
    """The request body, read once and put back for moto."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _called(environ: Mapping[str, Any], body: bytes) -> Call:
    """The access key and service (from the signature's credential) and operation of a
    request."""
    found = _CREDENTIAL.search(str(environ.get("HTTP_AUTHORIZATION", "")))
    caller, service = (found.group(1), found.group(2)) if found else ("", "unknown")
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return caller, service, target.rsplit(".", 1)[-1]
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        action = parse_qs(body.decode(errors="replace")).get("Action")
        if action:
            return caller, service, action[0]
    query = parse_qs(str(environ.get("QUERY_STRING", ""))).get("Action")
    if query:
        return caller, service, query[0]
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
    return caller, service, f"{method} {path}"


def error_response(
    environ: Mapping[str, Any], service: str, code: str, status: int
) -> tuple[str, list[tuple[str, str]], bytes]:
    """An error as the called service's protocol spells it, so botocore parses (and retries)
    it as it would AWS's."""
    message = f"injected {code}"
    reason = f"{status} {'Service Unavailable' if status == 503 else 'Error'}"
    if environ.get("HTTP_X_AMZ_TARGET"):
        payload = json.dumps({"__type": code, "message": message}).encode()
        return reason, [("Content-Type", "application/x-amz-json-1.0")], payload
    if service == "ec2":
        payload = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            "</Errors><RequestID>injected</RequestID></Response>"
        ).encode()
        return reason, [("Content-Type", "text/xml")], payload
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        payload = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
            f"<Message>{message}</Message></Error><RequestId>injected</RequestId></ErrorResponse>"
        ).encode()
        return reason, [("Content-Type", "text/xml")], payload
    payload = json.dumps({"message": message}).encode()
    return reason, [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)], payload


def _control(
    environ: dict[str, Any], start_response: Callable[..., Any], pressure: Pressure
) -> Iterable[bytes]:
    method = environ.get("REQUEST_METHOD", "GET")
    answer: dict[str, Any]
    status = "200 OK"
    if method == "GET":
        answer = pressure.report()
    elif method == "DELETE":
        pressure.clear()
        answer = {}
    elif method == "PUT":
        try:
            pressure.set(Plan.parse(json.loads(_body(environ) or b"{}")))
            answer = {}
        except ValueError as error:
            status, answer = "400 Bad Request", {"error": str(error)}
    else:
        status, answer = "405 Method Not Allowed", {"error": f"{method} is not served"}
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps(answer).encode()]


# ------------------------------------------------------------------ CreateFleet without capacity

_installed = threading.Event()
_REPORTED: Final = ("InstanceType", "AvailabilityZone", "SubnetId")


def install(pressure: Pressure = PRESSURE) -> None:
    """Make moto's CreateFleet honour the plan's pools without capacity. Imports moto; call it
    before the other CreateFleet wraps (idempotency's), so a retried token gets the same
    answer, errors and all, as EC2 gives."""
    if _installed.is_set():
        return
    from moto.core.responses import ActionResult
    from moto.ec2.responses.fleets import Fleets

    original: Callable[[Any], Any] = Fleets.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any) -> Any:
        params: dict[str, Any] = self.params
        target = params.get("TargetCapacitySpecification") or {}
        capacity_type = str(target.get("DefaultTargetCapacityType") or "on-demand")
        errors = _take_unavailable(
            params.get("LaunchTemplateConfigs") or [], capacity_type, pressure
        )
        if not errors:
            return original(self)
        if not any(c.get("Overrides") for c in params.get("LaunchTemplateConfigs") or []):
            return ActionResult(
                {"FleetId": f"fleet-{secrets.token_hex(8)}", "Errors": errors, "Instances": []}
            )
        result = original(self)
        found = getattr(result, "result", None)
        if isinstance(found, dict):
            found.setdefault("Errors", []).extend(errors)
        return result

    Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
    _installed.set()


def _take_unavailable(
    configs: list[dict[str, Any]], capacity_type: str, pressure: Pressure
) -> list[dict[str, Any]]:
    """Remove the overrides of pools without capacity from ``configs`` (moto's parsed request)
    and return EC2's error entries for them."""
    errors: list[dict[str, Any]] = []
    for config in configs:
        kept = []
        for override in config.get("Overrides") or []:
            instance_type = str(override.get("InstanceType") or "")
            zone = str(override.get("AvailabilityZone") or "")
            if not pressure.unavailable(instance_type, zone, capacity_type):
                kept.append(override)
                continue
            spec = config.get("LaunchTemplateSpecification") or {}
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": dict(spec),
                        "Overrides": {k: override[k] for k in _REPORTED if override.get(k)},
                    },
                    "Lifecycle": capacity_type,
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": ICE_MESSAGE,
                }
            )
        if "Overrides" in config:
            config["Overrides"] = kept
    return errors


def requests_per_second(
    records: Iterable[Mapping[str, Any]], *, window: float = 1.0
) -> Iterator[int]:
    """How many of ``records`` (as the endpoint reports them) fall in each ``window`` seconds,
    from the first to the last."""
    times = sorted(float(r["at"]) for r in records)
    if not times:
        return
    start, index = times[0], 0
    while index < len(times):
        end = start + window
        count = 0
        while index < len(times) and times[index] < end:
            count += 1
            index += 1
        yield count
        start = end
