"""Tracing and metrics: one OpenTelemetry setup, every instrument declared here (house rule 13).

Spans mark the seams (a reconcile, a batch, a provider call) and metrics count what the operator
did. Metrics carry Karpenter's names and labels (``karpenter_*``, and controller-runtime's
``controller_runtime_*``, ``workqueue_*``, ``leader_election_*``) so existing Karpenter dashboards
and alerts read karpy unchanged (operatorpkg's ``operator_<kind>_*`` too); a ``karpy_*`` name
marks a metric Karpenter has no equivalent for. docs/metrics.md lists them all, and under them
each of Karpenter's that karpy does not serve, with why (`NOT_SERVED`). Nothing is registered
globally: `Telemetry.setup()` builds a tracer and meter provider that wiring passes to
constructors, so tests get their own. /metrics is
rendered by OpenTelemetry's Prometheus exporter into a registry of this Telemetry's own; when
OTEL_EXPORTER_OTLP_ENDPOINT is set, spans and metrics are pushed over OTLP/HTTP as well.

Gauges that describe the cluster as it is (nodes, pods, NodePool usage and limits, cost,
conditions) are observed at scrape time from callbacks the metrics controller and the provisioner
register (`observe_state`, names in `STATE_GAUGES`), so a deleted node's series vanishes with it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Protocol

import attrs
from opentelemetry.context import Context
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    Meter,
    Observation,
    UpDownCounter,
)
from opentelemetry.metrics import _Gauge as Gauge  # the synchronous gauge's public name is private
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    Tracer,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry, generate_latest

import karpy

SCOPE: Final = "karpy"

# Seconds buckets: Prometheus client defaults plus the long tail slow reconciles reach.
DURATION_BUCKETS: Final[Sequence[float]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip

# Karpenter's duration buckets (its metrics.DurationBuckets): controller-runtime's, widened to the
# ten minutes a drain or an instance termination may take. Its duration histograms use these, so
# a dashboard's histogram_quantile reads the same boundaries.
KARPENTER_DURATION_BUCKETS: Final[Sequence[float]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0,
    20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
)  # fmt: skip

# client-go's work-queue latency buckets (ExponentialBuckets(10e-9, 10, 12)): 10 ns to 1,000 s.
WORKQUEUE_BUCKETS: Final[Sequence[float]] = tuple(1e-8 * 10**i for i in range(12))

Attributes = Mapping[str, str]


class QueueWork(Protocol):
    """What a work queue tells the scrape about the keys it is processing and holding."""

    name: str

    def processing_since(self) -> Sequence[float]:
        """`time.monotonic()` at which each key being processed now was handed out."""
        ...

    def depth(self) -> int:
        """Keys waiting to be processed."""
        ...


class RunnerWork(Protocol):
    """What a controller's runner tells the scrape: its name and its reconciles in flight."""

    name: str

    @property
    def in_flight(self) -> int: ...


class WorkQueues:
    """The live work queues of a process, for client-go's two gauges of unfinished work, which
    are read at scrape time (client-go refreshes them every 500 ms; a scrape reads them now).

    Held weakly: a queue that is gone stops reporting. The callbacks run on the scrape's thread;
    they only read the queues.
    """

    def __init__(self) -> None:
        self._queues: weakref.WeakSet[QueueWork] = weakref.WeakSet()

    def add(self, queue: QueueWork) -> None:
        self._queues.add(queue)

    def _running(self) -> list[tuple[str, list[float]]]:
        now = time.monotonic()
        return [
            (q.name, [max(0.0, now - t) for t in q.processing_since()]) for q in list(self._queues)
        ]

    def depth(self, _: CallbackOptions) -> Iterable[Observation]:
        """Keys waiting, per queue name. Read here rather than counted on every add and get:
        a count per key would cost two measurements per reconcile, on the hot path."""
        totals: dict[str, int] = {}
        for queue in list(self._queues):
            totals[queue.name] = totals.get(queue.name, 0) + queue.depth()
        return [Observation(count, {"name": name}) for name, count in totals.items()]

    def unfinished(self, _: CallbackOptions) -> Iterable[Observation]:
        """Seconds of work in progress, summed per queue."""
        return [Observation(sum(ages), {"name": name}) for name, ages in self._running()]

    def longest(self, _: CallbackOptions) -> Iterable[Observation]:
        """Seconds the longest-running key of each queue has been processed."""
        return [
            Observation(max(ages, default=0.0), {"name": name}) for name, ages in self._running()
        ]


class Runners:
    """The live controller runners of a process, for controller-runtime's active-workers gauge,
    read at scrape time like `WorkQueues` (held weakly; callbacks only read)."""

    def __init__(self) -> None:
        self._runners: weakref.WeakSet[RunnerWork] = weakref.WeakSet()

    def add(self, runner: RunnerWork) -> None:
        self._runners.add(runner)

    def active(self, _: CallbackOptions) -> Iterable[Observation]:
        """Reconciles in flight, per controller."""
        totals: dict[str, int] = {}
        for runner in list(self._runners):
            totals[runner.name] = totals.get(runner.name, 0) + runner.in_flight
        return [Observation(count, {"controller": name}) for name, count in totals.items()]


@attrs.frozen
class LabelledHistogram:
    """A histogram whose every point carries fixed labels (Karpenter's `controller`), so call
    sites record as they would on the bare instrument."""

    histogram: Histogram
    labels: Attributes

    def record(self, amount: float, attributes: Attributes | None = None) -> None:
        self.histogram.record(amount, {**self.labels, **(attributes or {})})


@attrs.frozen
class LabelledGauge:
    """A synchronous gauge with fixed labels; see `LabelledHistogram`."""

    gauge: Gauge
    labels: Attributes

    def set(self, amount: float, attributes: Attributes | None = None) -> None:
        self.gauge.set(amount, {**self.labels, **(attributes or {})})


@attrs.frozen
class Metrics:
    """Every metric instrument karpy records. Built once per MeterProvider by `Metrics.create`."""

    reconcile_total: Counter
    reconcile_errors_total: Counter
    reconcile_duration_seconds: Histogram
    workqueue_retries_total: Counter
    workqueue_adds_total: Counter
    workqueue_queue_duration_seconds: Histogram
    workqueue_work_duration_seconds: Histogram
    workqueues: WorkQueues
    runners: Runners
    max_concurrent_reconciles: Gauge
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
    provisioner_scheduling_duration_seconds: LabelledHistogram
    provisioner_unschedulable_pods: LabelledGauge
    provisioner_queue_depth: LabelledGauge
    provisioner_ignored_pods: Gauge
    nodeclaims_created_total: Counter
    nodeclaims_disrupted_total: Counter
    provisioner_batch_size: Histogram
    # Disruption.
    disruption_decisions_total: Counter
    disruption_eligible_nodes: Gauge
    disruption_queue_failures_total: Counter
    disruption_evaluation_duration_seconds: Histogram
    disruption_failed_validations_total: Counter
    nodepools_allowed_disruptions: Gauge
    nodepools_nodes_consuming_budgets: Gauge
    disruption_savings_per_hour: UpDownCounter
    # Nodes and their drain.
    nodes_created_total: Counter
    nodes_terminated_total: Counter
    pods_eviction_requests_total: Counter
    nodes_drained_total: Counter
    nodes_termination_duration_seconds: Histogram
    nodes_lifetime_duration_seconds: Histogram
    pods_drained_total: Counter
    pods_bound_duration_seconds: Histogram
    pods_scheduling_decision_duration_seconds: Histogram
    pods_startup_duration_seconds: Histogram
    pods_provisioning_bound_duration_seconds: Histogram
    pods_provisioning_startup_duration_seconds: Histogram
    nodeclaims_terminated_total: Counter
    nodeclaims_termination_duration_seconds: Histogram
    nodeclaims_instance_termination_duration_seconds: Histogram
    upkeep: UpkeepMetrics
    dry_run: DryRunMetrics
    conditions: Mapping[str, ConditionMetrics]
    interruption: InterruptionMetrics

    @classmethod
    def create(cls, meter: Meter) -> Metrics:
        def counter(name: str, description: str) -> Counter:
            return meter.create_counter(name, description=description)

        def histogram(
            name: str, description: str, buckets: Sequence[float] = DURATION_BUCKETS
        ) -> Histogram:
            return meter.create_histogram(
                name, description=description, explicit_bucket_boundaries_advisory=buckets
            )

        provisioner = {"controller": "provisioner"}
        queues = WorkQueues()
        runners = Runners()
        meter.create_observable_gauge(
            "workqueue_depth",
            callbacks=[queues.depth],
            description="Keys waiting in a work queue, by queue name.",
        )
        meter.create_observable_gauge(
            "controller_runtime_active_workers",
            callbacks=[runners.active],
            description="Workers reconciling a key right now, by controller.",
        )
        meter.create_observable_gauge(
            "workqueue_unfinished_work_seconds",
            callbacks=[queues.unfinished],
            description="Seconds of work in progress not yet done, summed over a work queue's "
            "keys being processed, by queue name.",
        )
        meter.create_observable_gauge(
            "workqueue_longest_running_processor_seconds",
            callbacks=[queues.longest],
            description="Seconds the longest-running key of a work queue has been processed, "
            "by queue name.",
        )
        return cls(
            workqueues=queues,
            workqueue_adds_total=counter(
                "workqueue_adds_total", "Keys added to a work queue, by queue name."
            ),
            workqueue_queue_duration_seconds=histogram(
                "workqueue_queue_duration_seconds",
                "Seconds a key waited in a work queue before it was processed, by queue name.",
                WORKQUEUE_BUCKETS,
            ),
            workqueue_work_duration_seconds=histogram(
                "workqueue_work_duration_seconds",
                "Seconds processing a key took, by queue name.",
                WORKQUEUE_BUCKETS,
            ),
            max_concurrent_reconciles=meter.create_gauge(
                "controller_runtime_max_concurrent_reconciles",
                description="Workers a controller runs keys on at most, by controller.",
            ),
            runners=runners,
            upkeep=UpkeepMetrics.create(meter),
            dry_run=DryRunMetrics.create(meter),
            conditions={kind: ConditionMetrics.create(meter, kind) for kind in CONDITIONED},
            interruption=InterruptionMetrics.create(meter),
            reconcile_total=counter(
                "controller_runtime_reconcile_total",
                "Reconciles by controller and result.",
            ),
            reconcile_errors_total=counter(
                "controller_runtime_reconcile_errors_total",
                "Reconciles that raised, by controller.",
            ),
            reconcile_duration_seconds=histogram(
                "controller_runtime_reconcile_time_seconds",
                "Time spent in one reconcile, by controller.",
            ),
            workqueue_retries_total=counter(
                "workqueue_retries_total", "Keys re-queued after an error, by queue name."
            ),
            watch_events_total=counter(
                "karpy_watch_events_total", "Watch events received, by kind and event type."
            ),
            watch_lists_total=counter(
                "karpy_watch_lists_total", "Full lists (initial and relists), by kind."
            ),
            watch_errors_total=counter(
                "karpy_watch_errors_total", "Broken lists or watch streams, by kind and reason."
            ),
            cluster_state_synced=meter.create_gauge(
                "karpenter_cluster_state_synced",
                description="1 when cluster state has listed every kind it informs, else 0.",
            ),
            cluster_state_objects=meter.create_gauge(
                "karpy_cluster_state_objects", description="Objects held in cluster state, by kind."
            ),
            leader_election_leader=meter.create_gauge(
                "leader_election_master_status",
                description="1 while this replica holds the leader Lease, else 0, by lease name.",
            ),
            leader_election_transitions_total=counter(
                "karpy_leader_election_transitions_total",
                "Times this replica acquired the leader Lease.",
            ),
            build_info=meter.create_gauge(
                "karpenter_build_info", description="Always 1; labelled with the karpy version."
            ),
            cloudprovider_duration_seconds=histogram(
                "karpenter_cloudprovider_duration_seconds",
                "Time spent in one CloudProvider call, by method and provider.",
            ),
            cloudprovider_errors_total=counter(
                "karpenter_cloudprovider_errors_total",
                "CloudProvider calls that raised, by method, provider and error type.",
            ),
            provisioner_scheduling_duration_seconds=LabelledHistogram(
                histogram(
                    "karpenter_scheduler_scheduling_duration_seconds",
                    "Time one scheduling simulation took, by controller.",
                ),
                provisioner,
            ),
            provisioner_unschedulable_pods=LabelledGauge(
                meter.create_gauge(
                    "karpenter_scheduler_unschedulable_pods_count",
                    description="Pods the last scheduling simulation could not place.",
                ),
                provisioner,
            ),
            provisioner_queue_depth=LabelledGauge(
                meter.create_gauge(
                    "karpenter_scheduler_queue_depth",
                    description="Pods the scheduling simulation running now has to place (0 "
                    "between simulations), by controller.",
                ),
                provisioner,
            ),
            provisioner_ignored_pods=meter.create_gauge(
                "karpenter_scheduler_ignored_pods_count",
                description="Pending pods the last provisioning batch left out because the "
                "scheduler cannot represent them (each gets a FailedScheduling event).",
            ),
            nodeclaims_created_total=counter(
                "karpenter_nodeclaims_created_total",
                "NodeClaims created, by reason (provisioned, or the disruption reason a "
                "replacement was made for), nodepool and min_values_relaxed.",
            ),
            nodeclaims_disrupted_total=counter(
                "karpenter_nodeclaims_disrupted_total",
                "NodeClaims disrupted, by reason, nodepool and capacity_type.",
            ),
            provisioner_batch_size=histogram(
                "karpy_provisioner_batch_size",
                "Pending pods in one provisioning batch.",
                (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
            ),
            disruption_decisions_total=counter(
                "karpenter_voluntary_disruption_decisions_total",
                "Disruption commands started, by decision (delete, replace), reason and "
                "consolidation_type.",
            ),
            disruption_queue_failures_total=counter(
                "karpenter_voluntary_disruption_queue_failures_total",
                "Disruption commands the queue rolled back (a replacement lost or not "
                "initialized in time), by decision, reason and consolidation_type.",
            ),
            disruption_evaluation_duration_seconds=histogram(
                "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
                "Seconds one disruption method took to decide, by reason and "
                "consolidation_type (each method a pass asks, until one yields commands).",
                KARPENTER_DURATION_BUCKETS,
            ),
            disruption_failed_validations_total=counter(
                "karpenter_voluntary_disruption_failed_validations_total",
                "Candidates of consolidation commands dropped because the cluster changed "
                "during the validation delay, by consolidation_type.",
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
            nodepools_nodes_consuming_budgets=meter.create_gauge(
                "karpenter_nodepools_nodes_consuming_budgets",
                description="Initialized NodeClaims of a NodePool that count against its "
                "disruption budgets now (deleting, in a disruption command, or not Ready), by "
                "nodepool.",
            ),
            disruption_savings_per_hour=meter.create_up_down_counter(
                "karpy_voluntary_disruption_savings_per_hour",
                description="Dollars per hour that finished disruption commands took off the "
                "cluster's price, summed, by reason and decision: each command adds the price of "
                "the NodeClaims it removed (their launched offerings) less the price its "
                "replacements were planned at (negative when a replacement costs more, as a "
                "drifted node's may). Commands whose prices karpy does not know add nothing.",
            ),
            nodes_created_total=counter(
                "karpenter_nodes_created_total",
                "Nodes that registered for a NodeClaim and became karpy's, by nodepool.",
            ),
            nodes_terminated_total=counter(
                "karpenter_nodes_terminated_total",
                "Nodes karpy drained and let go (termination finalizer removed), by nodepool.",
            ),
            pods_eviction_requests_total=counter(
                "karpenter_pods_eviction_requests_total",
                "Eviction API requests made while draining nodes, by code (the HTTP status: 200 "
                "accepted, 404 pod already gone, 429 refused by a PodDisruptionBudget).",
            ),
            nodes_drained_total=counter(
                "karpenter_nodes_drained_total",
                "Nodes whose drain finished (no pod left to evict), by nodepool.",
            ),
            nodes_termination_duration_seconds=histogram(
                "karpenter_nodes_termination_duration_seconds",
                "Seconds from a Node's deletion to the removal of its termination finalizer, "
                "by nodepool.",
                KARPENTER_DURATION_BUCKETS,
            ),
            nodes_lifetime_duration_seconds=histogram(
                "karpenter_nodes_lifetime_duration_seconds",
                "Seconds from a Node's creation to the removal of its termination finalizer, "
                "by nodepool.",
                KARPENTER_DURATION_BUCKETS,
            ),
            pods_drained_total=counter(
                "karpenter_pods_drained_total",
                "Pods a drain evicted (eviction accepted), by reason (the NodeClaim's "
                "disruption reason; empty when the Node was deleted directly).",
            ),
            pods_bound_duration_seconds=histogram(
                "karpenter_pods_bound_duration_seconds",
                "Seconds from a pod's creation to its binding to a node (its PodScheduled "
                "condition), for pods karpy saw unbound.",
                KARPENTER_DURATION_BUCKETS,
            ),
            pods_scheduling_decision_duration_seconds=histogram(
                "karpenter_pods_scheduling_decision_duration_seconds",
                "Seconds from karpy seeing a provisionable pod (its creation, or karpy's start "
                "for an older one) to the first scheduling simulation it takes part in.",
                KARPENTER_DURATION_BUCKETS,
            ),
            pods_startup_duration_seconds=histogram(
                "karpenter_pods_startup_duration_seconds",
                "Seconds from a pod's creation to its running (its Ready condition, else when "
                "karpy saw it Running), for pods karpy saw before they ran.",
                KARPENTER_DURATION_BUCKETS,
            ),
            pods_provisioning_bound_duration_seconds=histogram(
                "karpenter_pods_provisioning_bound_duration_seconds",
                "Seconds from the provisioner first placing a pod to its binding to a node (its "
                "PodScheduled condition).",
                KARPENTER_DURATION_BUCKETS,
            ),
            pods_provisioning_startup_duration_seconds=histogram(
                "karpenter_pods_provisioning_startup_duration_seconds",
                "Seconds from the provisioner first placing a pod to its running (its Ready "
                "condition, else when karpy saw it Running).",
                KARPENTER_DURATION_BUCKETS,
            ),
            nodeclaims_terminated_total=counter(
                "karpenter_nodeclaims_terminated_total",
                "NodeClaims whose termination finished (finalizer removed), by nodepool, "
                "capacity_type and zone.",
            ),
            nodeclaims_termination_duration_seconds=histogram(
                "karpenter_nodeclaims_termination_duration_seconds",
                "Seconds from a NodeClaim's deletion to the removal of its finalizer, by nodepool.",
                KARPENTER_DURATION_BUCKETS,
            ),
            nodeclaims_instance_termination_duration_seconds=histogram(
                "karpenter_nodeclaims_instance_termination_duration_seconds",
                "Seconds from a NodeClaim's InstanceTerminating condition (the drain done) to "
                "the provider reporting its instance gone, by nodepool.",
                KARPENTER_DURATION_BUCKETS,
            ),
        )


# ------------------------------------------------------------------ NodePool and NodeClaim upkeep
# NodePool status, drift conditions and node repair (Karpenter's karpenter_nodeclaims_drifted_total,
# karpenter_nodeclaims_unhealthy_disrupted_total). Expiry and repair also count in
# nodeclaims_disrupted_total, with reason "expired" and "unhealthy". A NodePool's usage and limits
# are the state gauges karpenter_nodepools_usage/limit.


@attrs.frozen
class UpkeepMetrics:
    """Instruments of the nodepool.* controllers, nodeclaim.disruption and node.health."""

    nodepools_nodes: Gauge
    nodeclaims_drifted_total: Counter
    nodeclaims_unhealthy_disrupted_total: Counter

    @classmethod
    def create(cls, meter: Meter) -> UpkeepMetrics:
        return cls(
            nodepools_nodes=meter.create_gauge(
                "karpy_nodepools_nodes",
                description="NodeClaims of a NodePool (its status.nodes), by nodepool.",
            ),
            nodeclaims_drifted_total=meter.create_counter(
                "karpenter_nodeclaims_drifted_total",
                description="NodeClaims marked Drifted, by type (the drift reason) and nodepool.",
            ),
            nodeclaims_unhealthy_disrupted_total=meter.create_counter(
                "karpenter_nodeclaims_unhealthy_disrupted_total",
                description=(
                    "NodeClaims deleted by node repair, by condition (the repair policy's node "
                    "condition) and nodepool."
                ),
            ),
        )


def _a(kind: str) -> str:
    """`kind` with its indefinite article, for descriptions."""
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


NODECLASSES: Final = ("ec2nodeclass",)
"""The NodeClass kinds (lower-cased, as operatorpkg names them) whose operator_<kind>_* metrics
karpy declares: Karpenter's metrics reference lists its AWS provider's EC2NodeClass. A provider
whose NodeClass is one of them gets its conditions and termination described (the metrics
controllers watch the provider's NodeClass kinds); the instruments are declared here, with the
rest, so docs/metrics.md lists them."""

CONDITIONED: Final = ("nodeclaim", "nodepool", "node", *NODECLASSES)
"""The kinds whose status conditions the operator_<kind>_* metrics describe."""

TERMINATING: Final = ("nodeclaim", "node", *NODECLASSES)
"""The kinds karpy holds with a finalizer (the AWS provider holds one on its EC2NodeClasses
until their AWS resources are gone), whose termination the operator_<kind>_termination_*
metrics time."""


@attrs.frozen
class ConditionMetrics:
    """Karpenter's status-condition and termination instruments of one kind (its operatorpkg
    names, ``operator_<kind>_*``); the count and current-status gauges are state gauges."""

    transitions_total: Counter
    transition_seconds: Histogram
    termination_duration_seconds: Histogram | None
    """None for a kind karpy holds no finalizer on (NodePools): it goes at once."""

    @classmethod
    def create(cls, meter: Meter, kind: str) -> ConditionMetrics:
        def histogram(name: str, description: str) -> Histogram:
            return meter.create_histogram(
                name,
                description=description,
                explicit_bucket_boundaries_advisory=KARPENTER_DURATION_BUCKETS,
            )

        return cls(
            transitions_total=meter.create_counter(
                f"operator_{kind}_status_condition_transitions_total",
                description=f"Changes of {_a(kind)}'s conditions (a condition appearing or its "
                "status changing), by type and the new status and reason.",
            ),
            transition_seconds=histogram(
                f"operator_{kind}_status_condition_transition_seconds",
                f"Seconds {_a(kind)}'s condition held a status before it changed, by type and the "
                "status and reason it left.",
            ),
            termination_duration_seconds=(
                histogram(
                    f"operator_{kind}_termination_duration_seconds",
                    f"Seconds from {_a(kind)}'s deletion to its going (its finalizers removed).",
                )
                if kind in TERMINATING
                else None
            ),
        )


@attrs.frozen
class InterruptionMetrics:
    """Karpenter's interruption-queue instruments (its AWS provider's names), recorded by a
    provider that reads an interruption queue (karpy_aws's SQS controller)."""

    received_messages_total: Counter
    deleted_messages_total: Counter
    message_queue_duration_seconds: Histogram

    @classmethod
    def create(cls, meter: Meter) -> InterruptionMetrics:
        return cls(
            received_messages_total=meter.create_counter(
                "karpenter_interruption_received_messages_total",
                description="Interruption-queue messages received, by message_type (the kind "
                "Karpenter names it; no_op for one that asks for nothing, unknown for one karpy "
                "cannot read).",
            ),
            deleted_messages_total=meter.create_counter(
                "karpenter_interruption_deleted_messages_total",
                description="Interruption-queue messages handled and deleted, by message_type.",
            ),
            message_queue_duration_seconds=meter.create_histogram(
                "karpenter_interruption_message_queue_duration_seconds",
                description="Seconds from an interruption event's time to karpy handling its "
                "message.",
                explicit_bucket_boundaries_advisory=KARPENTER_DURATION_BUCKETS,
            ),
        )


@attrs.frozen
class DryRunMetrics:
    """What shadow mode (--dry-run) withheld: karpy's own, Karpenter has no shadow mode."""

    decisions_total: Counter
    price_per_hour_total: Counter

    @classmethod
    def create(cls, meter: Meter) -> DryRunMetrics:
        return cls(
            decisions_total=meter.create_counter(
                "karpy_dry_run_decisions_total",
                description="Writes shadow mode (--dry-run) withheld, by action and kind.",
            ),
            price_per_hour_total=meter.create_counter(
                "karpy_dry_run_price_per_hour_total",
                unit="USD/h",
                description="$/h the withheld launches would add and disruptions would save, "
                "by action and kind.",
            ),
        )


Observe = Callable[[], Iterable[tuple[float, Attributes]]]
"""Current values of one state gauge: (value, labels) pairs, read at each scrape."""

#: The gauges read from cluster state at scrape time: key -> (name, description).
STATE_GAUGES: Final[Mapping[str, tuple[str, str]]] = {
    "nodes_allocatable": (
        "karpenter_nodes_allocatable",
        "Allocatable resources of a node karpy manages, by node_name, nodepool and resource_type.",
    ),
    "nodes_total_pod_requests": (
        "karpenter_nodes_total_pod_requests",
        "Requests of the non-DaemonSet pods on a node, by node_name, nodepool and resource_type.",
    ),
    "nodes_total_daemon_requests": (
        "karpenter_nodes_total_daemon_requests",
        "Requests of the DaemonSet pods on a node, by node_name, nodepool and resource_type.",
    ),
    "pods_state": (
        "karpenter_pods_state",
        "1 per pod, by name, namespace, node, nodepool, zone, capacity type, instance type and "
        "phase.",
    ),
    "nodepools_usage": (
        "karpenter_nodepools_usage",
        "Resources of the NodeClaims a NodePool launched, by nodepool and resource_type.",
    ),
    "nodepools_limit": (
        "karpenter_nodepools_limit",
        "A NodePool's spec.limits, by nodepool and resource_type.",
    ),
    "cluster_state_node_count": (
        "karpenter_cluster_state_node_count",
        "Nodes in cluster state.",
    ),
    "pods_unbound_time_seconds": (
        "karpenter_pods_unbound_time_seconds",
        "Seconds since an unbound pod was created, by name and namespace.",
    ),
    "pods_unstarted_time_seconds": (
        "karpenter_pods_unstarted_time_seconds",
        "Seconds since a pod that is not running yet was created, by name and namespace.",
    ),
    "pods_provisioning_scheduling_undecided_time_seconds": (
        "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
        "Seconds a provisionable pod has waited for its first scheduling decision, by name and "
        "namespace.",
    ),
    "pods_provisioning_unbound_time_seconds": (
        "karpenter_pods_provisioning_unbound_time_seconds",
        "Seconds since the provisioner first placed a pod that is not bound yet, by name and "
        "namespace.",
    ),
    "pods_provisioning_unstarted_time_seconds": (
        "karpenter_pods_provisioning_unstarted_time_seconds",
        "Seconds since the provisioner first placed a pod that is not running yet, by name and "
        "namespace.",
    ),
    "scheduler_unfinished_work_seconds": (
        "karpenter_scheduler_unfinished_work_seconds",
        "Seconds the scheduling simulation running now has taken so far (0 between "
        "simulations), by controller.",
    ),
    "cluster_state_unsynced_time_seconds": (
        "karpenter_cluster_state_unsynced_time_seconds",
        "Seconds cluster state has been seen not synced (0 while synced).",
    ),
    "nodes_total_pod_limits": (
        "karpenter_nodes_total_pod_limits",
        "Limits of the non-DaemonSet pods on a node, by node_name, nodepool and resource_type.",
    ),
    "nodes_total_daemon_limits": (
        "karpenter_nodes_total_daemon_limits",
        "Limits of the DaemonSet pods on a node, by node_name, nodepool and resource_type.",
    ),
    "nodes_system_overhead": (
        "karpenter_nodes_system_overhead",
        "Capacity a node holds back from pods (status.capacity less status.allocatable), by "
        "node_name, nodepool and resource_type.",
    ),
    "nodes_current_lifetime_seconds": (
        "karpenter_nodes_current_lifetime_seconds",
        "Seconds since a node karpy manages was created, by node_name and nodepool.",
    ),
    "cluster_utilization_percent": (
        "karpenter_cluster_utilization_percent",
        "Pod requests on the nodes karpy manages as a percentage of their allocatable, by "
        "resource_type.",
    ),
    "instance_type_offering_price_estimate": (
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "Dollars per hour the provider quotes for an offering, by instance_type, capacity_type "
        "and zone (refreshed each price period).",
    ),
    "instance_type_offering_available": (
        "karpenter_cloudprovider_instance_type_offering_available",
        "1 when the provider offers an instance type in a zone and capacity type now, else 0, by "
        "instance_type, capacity_type and zone.",
    ),
    "instance_type_cpu_cores": (
        "karpenter_cloudprovider_instance_type_cpu_cores",
        "vCPUs of an instance type, by instance_type.",
    ),
    "instance_type_memory_bytes": (
        "karpenter_cloudprovider_instance_type_memory_bytes",
        "Memory of an instance type in bytes, by instance_type.",
    ),
    **{
        f"{kind}_termination_current_time_seconds": (
            f"operator_{kind}_termination_current_time_seconds",
            f"Seconds since {_a(kind)} that is still terminating was deleted, by name and "
            "namespace.",
        )
        for kind in TERMINATING
    },
    **{
        f"{kind}_status_condition_count": (
            f"operator_{kind}_status_condition_count",
            f"1 per condition of {_a(kind)}, by name, namespace, type, status and reason.",
        )
        for kind in CONDITIONED
    },
    **{
        f"{kind}_status_condition_current_status_seconds": (
            f"operator_{kind}_status_condition_current_status_seconds",
            f"Seconds {_a(kind)}'s condition has held its status (since its lastTransitionTime), "
            "by name, namespace, type, status and reason.",
        )
        for kind in CONDITIONED
    },
    "nodeclaims_count": (
        "karpy_nodeclaims",
        "NodeClaims, by nodepool, capacity_type and whether they are launched/registered/ready.",
    ),
    "nodepools_cost": (
        "karpenter_nodepools_cost_total",
        "What the NodeClaims a NodePool launched cost now, in the provider's price unit (dollars "
        "per hour), by nodepool: the prices of the offerings they run on. Not a bill.",
    ),
}


_NOT_CLIENT_GO: Final = "karpy talks to the apiserver through kubernetes_asyncio, not client-go."
_NOT_GO_SDK: Final = "karpy's AWS provider calls AWS through its own client, not the Go SDK."
_NODEPOOL_GOES_AT_ONCE: Final = (
    "karpy holds no finalizer on NodePools: a deleted NodePool goes at once, with no "
    "terminating time to measure."
)
_NO_BATCHER: Final = "karpy's AWS provider does not batch API calls."


#: Karpenter's metrics (tests/unit/runtime/karpenter_metrics.txt) karpy does not serve, each with
#: why; docs/metrics.md lists them under the table.
NOT_SERVED: Final[Mapping[str, str]] = {
    "karpenter_cloudprovider_batcher_batch_size": _NO_BATCHER,
    "karpenter_cloudprovider_batcher_batch_time_seconds": _NO_BATCHER,
    "client_go_request_total": _NOT_CLIENT_GO,
    "client_go_request_duration_seconds": _NOT_CLIENT_GO,
    **{
        f"aws_sdk_go_{name}": _NOT_GO_SDK
        for name in (
            "request_total",
            "request_retry_count",
            "request_duration_seconds",
            "request_attempt_total",
            "request_attempt_duration_seconds",
        )
    },
    "controller_runtime_terminal_reconcile_errors_total": (
        "karpy has no terminal reconcile errors: every error is retried with backoff."
    ),
    "controller_runtime_reconcile_panics_total": (
        "Python raises instead of panicking: counted in controller_runtime_reconcile_errors_total."
    ),
    "leader_election_slowpath_total": "karpy's lease renewal has one path.",
    "karpenter_voluntary_disruption_consolidation_timeouts_total": (
        "karpy's consolidation search has no time limit, so it never times out."
    ),
    "operator_nodepool_termination_duration_seconds": _NODEPOOL_GOES_AT_ONCE,
    "operator_nodepool_termination_current_time_seconds": _NODEPOOL_GOES_AT_ONCE,
}


def observe_state(meter: Meter, sources: Mapping[str, Observe]) -> None:
    """Register an observable gauge for each STATE_GAUGES key in `sources`."""
    for key, source in sources.items():
        name, description = STATE_GAUGES[key]

        def callback(_: CallbackOptions, source: Observe = source) -> Iterable[Observation]:
            return [Observation(value, dict(labels)) for value, labels in source()]

        meter.create_observable_gauge(name, callbacks=[callback], description=description)


@attrs.define
class Telemetry:
    """The tracer, meter and metric instruments of one process, and the means to flush them.

    Side effects: `shutdown()` flushes and stops every exporter; call it once at exit.
    """

    tracer: Tracer
    meter: Meter
    metrics: Metrics
    reader: InMemoryMetricReader | None
    registry: CollectorRegistry
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    @classmethod
    def setup(
        cls,
        *,
        service_name: str,
        otlp_endpoint: str | None = None,
        span_exporter: SpanExporter | None = None,
        cluster_name: str | None = None,
        in_memory_metrics: bool = False,
    ) -> Telemetry:
        """Build providers for `service_name`.

        `span_exporter` (tests) receives every span synchronously; `otlp_endpoint` adds batched
        OTLP/HTTP export of spans and metrics (needs the `otlp` extra); `in_memory_metrics`
        (tests) keeps every point readable through `reader` as well. Each metric reader
        aggregates every measurement again, so the daemon has only those it serves: the
        Prometheus registry, and OTLP when asked.
        """
        resource = Resource.create(
            {
                "service.name": service_name,
                "service.version": karpy.__version__,
                **({"k8s.cluster.name": cluster_name} if cluster_name else {}),
            }
        )
        # Without a destination nothing is recorded (no cost per span), and no NodeClaim is
        # annotated with the context of a span nobody receives.
        exporting = span_exporter is not None or otlp_endpoint is not None
        tracer_provider = TracerProvider(
            resource=resource, sampler=ALWAYS_ON if exporting else ALWAYS_OFF
        )
        if span_exporter is not None:
            tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        reader = InMemoryMetricReader() if in_memory_metrics else None
        registry = CollectorRegistry(auto_describe=True)
        prometheus = PrometheusMetricReader(scope_info_enabled=False, registry=registry)
        readers: list[MetricReader] = [prometheus, *([reader] if reader is not None else [])]
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
            registry=registry,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )

    def prometheus_text(self) -> str:
        """Every current metric in the Prometheus text exposition format (version 0.0.4)."""
        return generate_latest(self.registry).decode()

    def shutdown(self) -> None:
        """Flush and stop every span processor and metric reader."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


# ------------------------------------------------------------------ trace context on objects
# A NodeClaim outlives the trace that created it: its launch, registration and initialization
# run in later reconciles, maybe in another process after a restart. The span that created it is
# recorded on the object as a W3C traceparent (annotation karpy.sh/traceparent), so those later
# spans can join or link to the batch (or disruption command) that asked for it.

_PROPAGATOR: Final = TraceContextTextMapPropagator()


def traceparent(span: Span) -> str | None:
    """`span`'s context as a W3C ``traceparent`` header value; None for a span that is not
    recorded (no exporter configured, or an invalid context)."""
    if not span.is_recording():
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=set_span_in_context(span))
    return carrier.get("traceparent")


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The span context a ``traceparent`` value names (marked remote); None when `value` is
    absent or malformed (a hand-edited annotation is ignored, never an error)."""
    if not value:
        return None
    context = _PROPAGATOR.extract({"traceparent": value})
    found = get_current_span(context).get_span_context()
    return found if found.is_valid else None


def remote_parent(value: str | None) -> Context | None:
    """A context whose current span is the one `value` names, to start a child span in that
    trace; None when there is none."""
    found = parse_traceparent(value)
    return set_span_in_context(NonRecordingSpan(found)) if found is not None else None


def links_to(*values: str | None) -> list[Link]:
    """A span link to each span the traceparent values name (the invalid ones left out)."""
    return [Link(found) for found in map(parse_traceparent, values) if found is not None]


def current_link() -> list[Link]:
    """A link to the span current now, if any (to tie a span started in another trace back to
    the reconcile that ran it)."""
    found = get_current_span().get_span_context()
    return [Link(found)] if found.is_valid else []


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
