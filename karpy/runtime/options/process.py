"""How the process runs and reaches the cluster: leader election, the probe and metrics ports,
the API client, watches, reconcile retries, shutdown and telemetry.

Each field is one option (karpy.runtime.options.declare); `Options` gathers the groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from karpy.apis.duration import format_duration
from karpy.runtime.backoff import Backoff
from karpy.runtime.options.declare import OptionsError, Setting, composite, option
from karpy.runtime.options.values import (
    non_empty,
    parse_bool,
    parse_disabled,
    parse_port,
    parse_service,
    positive_duration,
    positive_float,
    positive_int,
)


@attrs.frozen
class LeaderElectionOptions:
    """Leader election on a coordination.k8s.io/v1 Lease, with client-go's timings."""

    enabled: bool = option(
        "DISABLE_LEADER_ELECTION", "--disable-leader-election", True, parse_disabled,
        "run controllers without a lease", switch=True,
    )  # fmt: skip
    name: str = option(
        "LEADER_ELECTION_NAME", "--leader-election-name", "karpy-leader-election", non_empty,
        "Lease name",
    )  # fmt: skip
    namespace: str = option(
        "LEADER_ELECTION_NAMESPACE", "--leader-election-namespace", "kube-system", non_empty,
        "Lease ns",
    )  # fmt: skip
    identity: str = option(
        "LEADER_ELECTION_IDENTITY", "--leader-election-identity", "", non_empty, "holder id"
    )
    """This replica's holderIdentity; `load` defaults it to `<hostname>_<uuid4>` as client-go
    does."""
    lease_duration: float = option(
        "LEADER_ELECTION_LEASE_DURATION", "--leader-election-lease-duration", 15.0,
        positive_duration, "lease duration",
    )  # fmt: skip
    """Seconds a follower waits after the last observed renewal before taking over."""
    renew_deadline: float = option(
        "LEADER_ELECTION_RENEW_DEADLINE", "--leader-election-renew-deadline", 10.0,
        positive_duration, "renew deadline",
    )  # fmt: skip
    """Seconds the leader keeps retrying a renewal before it gives up leadership (and exits)."""
    retry_period: float = option(
        "LEADER_ELECTION_RETRY_PERIOD", "--leader-election-retry-period", 2.0,
        positive_duration, "retry period",
    )  # fmt: skip
    """Seconds between acquire/renew attempts (jittered by up to 20%)."""


def check_leader_timings(le: LeaderElectionOptions) -> None:
    # client-go's validation: the lease outlives the renew deadline, which outlives a retry.
    if le.lease_duration <= le.renew_deadline:
        msg = (
            f"LEADER_ELECTION_LEASE_DURATION ({format_duration(le.lease_duration)}) must be "
            f"greater than LEADER_ELECTION_RENEW_DEADLINE ({format_duration(le.renew_deadline)})"
        )
        raise OptionsError(msg)
    if le.renew_deadline <= 1.2 * le.retry_period:
        msg = (
            f"LEADER_ELECTION_RENEW_DEADLINE ({format_duration(le.renew_deadline)}) must be "
            f"greater than 1.2 x LEADER_ELECTION_RETRY_PERIOD ({format_duration(le.retry_period)})"
        )
        raise OptionsError(msg)


@attrs.frozen
class ServerOptions:
    """The probe and metrics HTTP endpoints; they run on every replica, leader or not."""

    bind_address: str = option(
        "BIND_ADDRESS", "--bind-address",
        "0.0.0.0",  # noqa: S104 -- probes must be reachable from the kubelet
        non_empty, "address the probe and metrics ports bind",
    )  # fmt: skip
    metrics_port: int = option(
        "METRICS_PORT", "--metrics-port", 8080, parse_port, "port serving /metrics"
    )
    health_probe_port: int = option(
        "HEALTH_PROBE_PORT", "--health-probe-port", 8081, parse_port,
        "port serving /healthz, /readyz",
    )  # fmt: skip


@attrs.frozen
class WebhookOptions:
    """The conversion webhook serving karpenter.sh/v1beta1 beside v1 (karpy.operator.conversion).

    Off unless enabled: while it is off, the apiserver refuses every v1beta1 request (it has no
    one to convert for it) and v1 works as ever. The chart turns it on.
    """

    enabled: bool = option(
        "ENABLE_WEBHOOK", "--enable-webhook", False, parse_bool,
        "serve the v1beta1 conversion webhook", switch=True,
    )  # fmt: skip
    port: int = option(
        "WEBHOOK_PORT", "--webhook-port", 8443, parse_port, "port serving the conversion webhook"
    )
    service: str = option(
        "WEBHOOK_SERVICE", "--webhook-service", "karpy.karpy", parse_service,
        "Service (name.namespace) the apiserver reaches the webhook through",
    )  # fmt: skip
    """Port 443 of this Service must lead to `port` on the replicas."""
    url: str | None = option(
        "WEBHOOK_URL", "--webhook-url", None, non_empty,
        "https URL the apiserver reaches the webhook at instead (karpy outside the cluster)",
    )  # fmt: skip
    """When set, registered instead of `service`; a URL without a port gets `port`."""


@attrs.frozen
class KubeOptions:
    """How to reach the apiserver."""

    kubeconfig: Path | None = option(
        "KUBECONFIG", "--kubeconfig", None, Path, "kubeconfig file (default: in-cluster config)"
    )
    """None means in-cluster config (service account)."""
    request_timeout: float = option(
        "KUBE_REQUEST_TIMEOUT", "--kube-request-timeout", 30.0, positive_duration, "API timeout"
    )
    """Seconds allowed for any single non-watch API request."""
    qps: float = option(
        "KUBE_CLIENT_QPS", "--kube-client-qps", 200.0, positive_float, "API requests per second"
    )
    """Sustained API requests per second (Karpenter's KUBE_CLIENT_QPS default)."""
    burst: int = option(
        "KUBE_CLIENT_BURST", "--kube-client-burst", 300, positive_int, "API request burst"
    )
    """Requests allowed in a burst above `qps` (Karpenter's KUBE_CLIENT_BURST default)."""


def _watch_backoff(default: Backoff, given: Mapping[str, Any]) -> Backoff:
    cap: float = given["cap"]
    return Backoff(base=min(default.base, cap), cap=cap)


@attrs.frozen
class WatchingOptions:
    """Informer streams (see karpy.kube.watch)."""

    server_timeout: float = option(
        "WATCH_TIMEOUT", "--watch-timeout", 300.0, positive_duration, "server-side watch timeout"
    )
    """timeoutSeconds sent with each watch; the apiserver ends the stream and karpy re-watches."""
    inactivity_timeout: float = option(
        "WATCH_INACTIVITY_TIMEOUT", "--watch-inactivity-timeout", 120.0, positive_duration,
        "reconnect a silent watch after",
    )  # fmt: skip
    """Seconds without any event (bookmarks included) after which a stream is presumed dead."""
    backoff: Backoff = composite(
        Backoff(base=1.0, cap=30.0),
        _watch_backoff,
        cap=Setting("WATCH_BACKOFF_MAX", "--watch-backoff-max", positive_duration,
                    "max reconnect delay"),
    )  # fmt: skip
    """Reconnect delays after a failed list or watch; reset once a list succeeds."""


def _reconcile_backoff(default: Backoff, given: Mapping[str, Any]) -> Backoff:
    base: float = given.get("base", default.base)
    cap: float = given.get("cap", default.cap)
    if base > cap:
        msg = "RECONCILE_BACKOFF_BASE must not exceed RECONCILE_BACKOFF_MAX"
        raise OptionsError(msg)
    return Backoff(base=base, cap=cap)


@attrs.frozen
class ReconcileOptions:
    """Per-key error backoff for reconcilers (house rule 11: 1s to 5min, reset on success)."""

    backoff: Backoff = composite(
        Backoff(base=1.0, cap=300.0),
        _reconcile_backoff,
        base=Setting("RECONCILE_BACKOFF_BASE", "--reconcile-backoff-base", positive_duration,
                     "first retry"),
        cap=Setting("RECONCILE_BACKOFF_MAX", "--reconcile-backoff-max", positive_duration,
                    "max retry"),
    )  # fmt: skip


@attrs.frozen
class ShutdownOptions:
    grace_period: float = option(
        "SHUTDOWN_GRACE_PERIOD", "--shutdown-grace-period", 25.0, positive_duration,
        "drain deadline",
    )  # fmt: skip
    """Seconds allowed to finish in-flight reconciles after SIGTERM, below the kubelet's 30 s."""


@attrs.frozen
class TelemetryOptions:
    otlp_endpoint: str | None = option(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "--otlp-endpoint", None, non_empty,
        "OTLP/HTTP endpoint",
    )  # fmt: skip
    """When set, spans and metrics are also exported over OTLP/HTTP."""
    service_name: str = option(
        "OTEL_SERVICE_NAME", "--service-name", "karpy", non_empty,
        "service.name resource attribute",
    )  # fmt: skip
