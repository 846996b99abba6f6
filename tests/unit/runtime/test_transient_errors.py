"""Which reconcile errors the Runner reports in one line (an outage) and how it words them."""

from __future__ import annotations

from karpy.kube.errors import ConflictError, ServerError, TooManyRequestsError, UnreachableError
from karpy.runtime.reconciler import describe, is_transient


def test_outage_errors_are_transient_and_bugs_are_not() -> None:
    assert is_transient(UnreachableError("connection refused"))
    assert is_transient(ServerError(503, "ServiceUnavailable", "etcd"))
    assert is_transient(TooManyRequestsError(429, "TooManyRequests", "slow", retry_after=1.0))
    assert is_transient(ConnectionRefusedError(111, "Connection refused"))
    assert is_transient(TimeoutError())
    assert not is_transient(ConflictError(409, "Conflict", "stale"))
    assert not is_transient(KeyError("bug"))
    assert is_transient(ExceptionGroup("two", [TimeoutError(), UnreachableError("down")]))
    assert not is_transient(ExceptionGroup("mixed", [TimeoutError(), ValueError("bug")]))


def test_describe_is_one_line_with_the_cause() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as cause:
            raise UnreachableError("apiserver 127.0.0.1:6443") from cause
    except UnreachableError as error:
        text = describe(error)
    assert "\n" not in text
    assert text.startswith("UnreachableError: kubernetes API error 0 Unreachable")
    assert "caused by ConnectionRefusedError" in text
