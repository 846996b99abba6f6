"""Tracing and metrics: one OpenTelemetry setup, every instrument declared here (house rule 13).

Spans mark the seams (a reconcile, a batch, a provider call) and metrics count what the operator
did, named `karpy_<subsystem>_<name>_<unit>`. Nothing is registered globally: `Telemetry.setup()`
builds a tracer and meter provider that wiring passes to constructors, so tests get their own with
an in-memory exporter. /metrics is served in the Prometheus text format, rendered here from an
in-memory metric reader because the SDK ships no Prometheus exporter of its own; when
OTEL_EXPORTER_OTLP_ENDPOINT is set, spans and metrics are pushed over OTLP/HTTP as well.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs
from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter
from opentelemetry.metrics import _Gauge as Gauge  # the synchronous gauge's public name is private
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge as GaugeData,
)
from opentelemetry.sdk.metrics.export import (
    Histogram as HistogramData,
)
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricExporter,
    MetricReader,
    NumberDataPoint,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Tracer

import karpy

SCOPE: Final = "karpy"

# Seconds buckets: Prometheus client defaults plus the long tail slow reconciles reach.
DURATION_BUCKETS: Final[Sequence[float]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip


@attrs.frozen
class Metrics:
    """Every metric instrument karpy records. Built once per MeterProvider by `Metrics.create`."""

    reconcile_total: Counter
    reconcile_errors_total: Counter
    reconcile_duration_seconds: Histogram
    workqueue_depth: UpDownCounter
    workqueue_retries_total: Counter
    watch_events_total: Counter
    watch_lists_total: Counter
    watch_errors_total: Counter
    cluster_state_synced: Gauge
    cluster_state_objects: Gauge
    leader_election_leader: Gauge
    leader_election_transitions_total: Counter
    build_info: Gauge
    cloudprovider_duration_seconds: Histogram
    cloudprovider_errors_total: Counter
    provisioner_scheduling_duration_seconds: Histogram
    provisioner_unschedulable_pods: Gauge
    nodeclaims_created_total: Counter
    nodeclaims_disrupted_total: Counter
    # Disruption (Karpenter's names).
    disruption_decisions_total: Counter
    disruption_eligible_nodes: Gauge
    nodepools_allowed_disruptions: Gauge
    upkeep: UpkeepMetrics

    @classmethod
    def create(cls, meter: Meter) -> Metrics:
        return cls(
            upkeep=UpkeepMetrics.create(meter),
            reconcile_total=meter.create_counter(
                "karpy_controller_reconcile_total",
                description="Reconciles by controller and result (success, requeue, error).",
            ),
            reconcile_errors_total=meter.create_counter(
                "karpy_controller_reconcile_errors_total",
                description="Reconciles that raised, by controller.",
            ),
            reconcile_duration_seconds=meter.create_histogram(
                "karpy_controller_reconcile_duration_seconds",
                unit="s",
                description="Time spent in one reconcile, by controller.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            workqueue_depth=meter.create_up_down_counter(
                "karpy_workqueue_depth",
                description="Keys waiting in a work queue (ready or delayed), by queue.",
            ),
            workqueue_retries_total=meter.create_counter(
                "karpy_workqueue_retries_total",
                description="Keys re-queued after an error, by queue.",
            ),
            watch_events_total=meter.create_counter(
                "karpy_watch_events_total",
                description="Watch events received, by kind and event type.",
            ),
            watch_lists_total=meter.create_counter(
                "karpy_watch_lists_total",
                description="Full lists (initial and relists), by kind.",
            ),
            watch_errors_total=meter.create_counter(
                "karpy_watch_errors_total",
                description="Broken lists or watch streams, by kind and reason.",
            ),
            cluster_state_synced=meter.create_gauge(
                "karpy_cluster_state_synced",
                description="1 when every informer has listed, else 0.",
            ),
            cluster_state_objects=meter.create_gauge(
                "karpy_cluster_state_objects",
                description="Objects held in cluster state, by kind.",
            ),
            leader_election_leader=meter.create_gauge(
                "karpy_leader_election_leader",
                description="1 while this replica holds the leader Lease, else 0.",
            ),
            leader_election_transitions_total=meter.create_counter(
                "karpy_leader_election_transitions_total",
                description="Times this replica acquired the leader Lease.",
            ),
            build_info=meter.create_gauge(
                "karpy_build_info", description="Always 1; labelled with the karpy version."
            ),
            cloudprovider_duration_seconds=meter.create_histogram(
                "karpy_cloudprovider_duration_seconds",
                unit="s",
                description="Time spent in one CloudProvider call, by method and provider.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            cloudprovider_errors_total=meter.create_counter(
                "karpy_cloudprovider_errors_total",
                description="CloudProvider calls that raised, by method, provider and error type.",
            ),
            provisioner_scheduling_duration_seconds=meter.create_histogram(
                "karpy_provisioner_scheduling_duration_seconds",
                unit="s",
                description="Time one provisioning solve took.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            provisioner_unschedulable_pods=meter.create_gauge(
                "karpy_provisioner_unschedulable_pods_count",
                description="Pods the last provisioning batch could not place.",
            ),
            nodeclaims_created_total=meter.create_counter(
                "karpy_nodeclaims_created_total",
                description="NodeClaims created, by reason and nodepool.",
            ),
            nodeclaims_disrupted_total=meter.create_counter(
                "karpy_nodeclaims_disrupted_total",
                description="NodeClaims deleted by voluntary disruption, by reason and nodepool.",
            ),
            disruption_decisions_total=meter.create_counter(
                "karpenter_voluntary_disruption_decisions_total",
                description="Disruption commands started, by decision, reason and "
                "consolidation type.",
            ),
            disruption_eligible_nodes=meter.create_gauge(
                "karpenter_voluntary_disruption_eligible_nodes",
                description="Candidates a disruption method could act on, by reason.",
            ),
            nodepools_allowed_disruptions=meter.create_gauge(
                "karpenter_nodepools_allowed_disruptions",
                description="NodeClaims a NodePool's budgets allow to start disrupting now, "
                "by nodepool and reason.",
            ),
        )


# ------------------------------------------------------------------ NodePool and NodeClaim upkeep
# NodePool status, drift conditions and node repair (Karpenter's karpenter_nodepools_usage/limit,
# karpenter_nodeclaims_drifted_total, karpenter_nodeclaims_unhealthy_disrupted_total). Expiry and
# repair also count in nodeclaims_disrupted_total, with reason "expired" and "unhealthy".


@attrs.frozen
class UpkeepMetrics:
    """Instruments of the nodepool.* controllers, nodeclaim.disruption and node.health."""

    nodepools_usage: Gauge
    nodepools_limit: Gauge
    nodepools_nodes: Gauge
    nodeclaims_drifted_total: Counter
    nodeclaims_unhealthy_disrupted_total: Counter

    @classmethod
    def create(cls, meter: Meter) -> UpkeepMetrics:
        return cls(
            nodepools_usage=meter.create_gauge(
                "karpy_nodepools_usage",
                description="Summed capacity of a NodePool's nodes, by nodepool and resource_type.",
            ),
            nodepools_limit=meter.create_gauge(
                "karpy_nodepools_limit",
                description="A NodePool's spec.limits, by nodepool and resource_type.",
            ),
            nodepools_nodes=meter.create_gauge(
                "karpy_nodepools_nodes",
                description="NodeClaims of a NodePool (its status.nodes), by nodepool.",
            ),
            nodeclaims_drifted_total=meter.create_counter(
                "karpy_nodeclaims_drifted_total",
                description="NodeClaims marked Drifted, by type (the drift reason) and nodepool.",
            ),
            nodeclaims_unhealthy_disrupted_total=meter.create_counter(
                "karpy_nodeclaims_unhealthy_disrupted_total",
                description=(
                    "NodeClaims deleted by node repair, by condition (the repair policy's node "
                    "condition) and nodepool."
                ),
            ),
        )


@attrs.define
class Telemetry:
    """The tracer, meter and metric instruments of one process, and the means to flush them.

    Side effects: `shutdown()` flushes and stops every exporter; call it once at exit.
    """

    tracer: Tracer
    meter: Meter
    metrics: Metrics
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    @classmethod
    def setup(
        cls,
        *,
        service_name: str,
        otlp_endpoint: str | None = None,
        span_exporter: SpanExporter | None = None,
    ) -> Telemetry:
        """Build providers for `service_name`.

        `span_exporter` (tests) receives every span synchronously; `otlp_endpoint` adds batched
        OTLP/HTTP export of spans and metrics (needs the `otlp` extra).
        """
        resource = Resource.create(
            {"service.name": service_name, "service.version": karpy.__version__}
        )
        tracer_provider = TracerProvider(resource=resource)
        if span_exporter is not None:
            tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        reader = InMemoryMetricReader()
        readers: list[MetricReader] = [reader]
        if otlp_endpoint is not None:
            otlp_spans, otlp_metrics = _otlp_exporters(otlp_endpoint)
            tracer_provider.add_span_processor(BatchSpanProcessor(otlp_spans))
            readers.append(PeriodicExportingMetricReader(otlp_metrics))
        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        meter = meter_provider.get_meter(SCOPE, karpy.__version__)
        metrics = Metrics.create(meter)
        metrics.build_info.set(1, {"version": karpy.__version__})
        return cls(
            tracer=tracer_provider.get_tracer(SCOPE, karpy.__version__),
            meter=meter,
            metrics=metrics,
            reader=reader,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )

    def prometheus_text(self) -> str:
        """Every current metric in the Prometheus text exposition format (version 0.0.4)."""
        data = self.reader.get_metrics_data()
        if data is None:
            return ""
        lines: list[str] = []
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    lines.extend(_render(metric.name, metric.description or "", metric.data))
        return "".join(line + "\n" for line in lines)

    def shutdown(self) -> None:
        """Flush and stop every span processor and metric reader."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _otlp_exporters(endpoint: str) -> tuple[SpanExporter, MetricExporter]:
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )
    except ImportError as error:
        msg = (
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed; "
            "install karpy[otlp]"
        )
        raise RuntimeError(msg) from error
    base = endpoint.rstrip("/")
    return (
        OTLPSpanExporter(endpoint=f"{base}/v1/traces"),
        OTLPMetricExporter(endpoint=f"{base}/v1/metrics"),
    )


# ------------------------------------------------------------------ Prometheus text rendering


def _render(name: str, description: str, data: object) -> Iterable[str]:
    if isinstance(data, Sum):
        kind = "counter" if data.is_monotonic else "gauge"
        points: Sequence[NumberDataPoint] = data.data_points
        yield from _header(name, description, kind)
        for point in points:
            yield f"{name}{_labels(point.attributes)} {_number(point.value)}"
    elif isinstance(data, GaugeData):
        yield from _header(name, description, "gauge")
        for point in data.data_points:
            yield f"{name}{_labels(point.attributes)} {_number(point.value)}"
    elif isinstance(data, HistogramData):
        yield from _header(name, description, "histogram")
        for hpoint in data.data_points:
            yield from _histogram_lines(name, hpoint)


def _header(name: str, description: str, kind: str) -> Iterable[str]:
    escaped = description.replace("\\", "\\\\").replace("\n", "\\n")
    yield f"# HELP {name} {escaped}"
    yield f"# TYPE {name} {kind}"


def _histogram_lines(name: str, point: HistogramDataPoint) -> Iterable[str]:
    attributes = dict(point.attributes or {})
    cumulative = 0
    for bound, count in zip(point.explicit_bounds, point.bucket_counts, strict=False):
        cumulative += count
        yield f"{name}_bucket{_labels({**attributes, 'le': _number(bound)})} {cumulative}"
    yield f"{name}_bucket{_labels({**attributes, 'le': '+Inf'})} {point.count}"
    yield f"{name}_sum{_labels(attributes)} {_number(point.sum)}"
    yield f"{name}_count{_labels(attributes)} {point.count}"


def _labels(attributes: Mapping[str, object] | None) -> str:
    if not attributes:
        return ""
    parts = [f'{key}="{_escape(str(value))}"' for key, value in sorted(attributes.items())]
    return "{" + ",".join(parts) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))
