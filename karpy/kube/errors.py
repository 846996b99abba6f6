"""Kubernetes API failures as karpy exceptions.

Controllers decide by failure kind (NotFound means done, Conflict means requeue, 429 means wait),
not by HTTP status codes buried in an SDK exception. So every API error is translated here, at the
boundary, and the SDK's exception is chained as `__cause__` for the full response:

    KubeError                   any failed API call (status, reason, message from the Status body)
    ├── NotFoundError           404
    ├── ConflictError           409: optimistic-lock conflict or AlreadyExists
    ├── GoneError               410: resourceVersion too old; relist
    ├── TooManyRequestsError    429: throttled or a PDB refused an eviction; honour `retry_after`
    ├── ServerError             5xx
    ├── UnreachableError        no HTTP answer at all (connection refused or reset, timeout)
    └── WatchError              an ERROR event inside a watch stream (other than 410)

`KubeConfigError` (a ValueError) stands apart: no request was made, the configuration is unusable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from kubernetes_asyncio.client.exceptions import ApiException


class KubeError(Exception):
    """A Kubernetes API call failed."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"kubernetes API error {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFoundError(KubeError):
    """The object does not exist (404)."""


class ConflictError(KubeError):
    """The write lost an optimistic-lock race, or the object already exists (409)."""


class GoneError(KubeError):
    """The requested resourceVersion is no longer available (410); list again."""


class TooManyRequestsError(KubeError):
    """The apiserver asked to slow down, or an eviction was refused by a PDB (429)."""

    transient: ClassVar[bool] = True
    """Retrying later is the whole remedy: the Runner logs it as one line, no stack trace."""

    def __init__(
        self, status: int, reason: str, message: str, *, retry_after: float | None
    ) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after


class ServerError(KubeError):
    """The apiserver failed (5xx); usually transient."""

    transient: ClassVar[bool] = True


class FencedError(KubeError):
    """A write this process refused to send: it led, and its leader lease may have lapsed (it
    has not renewed it within the renew deadline), so another replica may be leading now."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Fenced", message)


class KubeConfigError(ValueError):
    """The kubeconfig (or in-cluster service account) cannot be used; the message says why."""


class UnreachableError(KubeError):
    """The apiserver could not be reached or did not answer in time (status 0)."""

    transient: ClassVar[bool] = True

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unreachable", message)


class WatchError(KubeError):
    """A watch stream delivered an ERROR event other than 410 Gone."""


def from_status(
    status: int,
    body: bytes | str | None,
    *,
    headers: Mapping[str, str] | None = None,
    reason: str = "",
) -> KubeError:
    """Build the right `KubeError` from an HTTP status, its (Status JSON) body and headers."""
    message, status_reason = _parse_status_body(body)
    reason = status_reason or reason or "Unknown"
    if status == 404:
        return NotFoundError(status, reason, message)
    if status == 409:
        return ConflictError(status, reason, message)
    if status == 410:
        return GoneError(status, reason, message)
    if status == 429:
        return TooManyRequestsError(
            status, reason, message, retry_after=_retry_after(headers or {})
        )
    if status >= 500:
        return ServerError(status, reason, message)
    return KubeError(status, reason, message)


def from_status_object(status: Mapping[str, Any]) -> KubeError:
    """Translate a metav1.Status dict (as found in a watch ERROR event)."""
    code = status.get("code")
    error = from_status(
        code if isinstance(code, int) else 500,
        orjson.dumps(status),
        reason=str(status.get("reason", "")),
    )
    if isinstance(error, GoneError):
        return error
    return WatchError(error.status, error.reason, error.message)


def translate(error: ApiException) -> KubeError:
    """Translate an SDK exception; use as `raise translate(e) from e`."""
    headers = {str(k): str(v) for k, v in (error.headers or {}).items()}
    return from_status(
        int(error.status or 0), error.body, headers=headers, reason=str(error.reason or "")
    )


def _parse_status_body(body: bytes | str | None) -> tuple[str, str]:
    if not body:
        return "", ""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return text[:500], ""
    if not isinstance(parsed, dict):
        return str(parsed)[:500], ""
    return str(parsed.get("message", "")), str(parsed.get("reason", ""))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for key, value in headers.items():
        if key.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None
