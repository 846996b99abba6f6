"""Every instrument renders in the Prometheus text format from the SDK's in-memory reader."""

from __future__ import annotations

import re

from opentelemetry.trace import INVALID_SPAN

from karpy.runtime.reconciler import WorkQueue
from karpy.runtime.telemetry import (
    DURATION_BUCKETS,
    Telemetry,
    current_link,
    links_to,
    parse_traceparent,
    remote_parent,
    traceparent,
)

SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$")


def parse(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match is not None, f"not a Prometheus sample line: {line!r}"
        samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


async def test_counter_gauge_and_histogram_render(telemetry: Telemetry) -> None:
    metrics = telemetry.metrics
    metrics.reconcile_total.add(2, {"controller": "a.b", "result": "success"})
    metrics.cluster_state_synced.set(1)
    queue: WorkQueue[str] = WorkQueue("q", telemetry=telemetry)
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("a")  # already waiting: one key
    await queue.get()
    metrics.reconcile_duration_seconds.record(0.2, {"controller": "a.b"})
    metrics.reconcile_duration_seconds.record(7.0, {"controller": "a.b"})
    text = telemetry.prometheus_text()
    samples = parse(text)
    assert "# TYPE controller_runtime_reconcile_total counter" in text
    assert "# TYPE workqueue_depth gauge" in text
    assert "# TYPE controller_runtime_reconcile_time_seconds histogram" in text
    assert samples['controller_runtime_reconcile_total{controller="a.b",result="success"}'] == 2
    assert samples["karpenter_cluster_state_synced"] == 1
    assert samples['workqueue_depth{name="q"}'] == 2
    hist = "controller_runtime_reconcile_time_seconds"
    assert samples[f'{hist}_bucket{{controller="a.b",le="0.25"}}'] == 1
    assert samples[f'{hist}_bucket{{controller="a.b",le="10.0"}}'] == 2
    assert samples[f'{hist}_bucket{{controller="a.b",le="+Inf"}}'] == 2
    assert samples[f'{hist}_count{{controller="a.b"}}'] == 2
    assert samples[f'{hist}_sum{{controller="a.b"}}'] == 7.2
    buckets = [key for key in samples if key.startswith(f"{hist}_bucket")]
    assert len(buckets) == len(DURATION_BUCKETS) + 1


def test_buckets_are_cumulative(telemetry: Telemetry) -> None:
    for value in (0.001, 0.03, 0.03, 100.0):
        telemetry.metrics.reconcile_duration_seconds.record(value, {"controller": "c"})
    samples = parse(telemetry.prometheus_text())
    counts = [
        value
        for key, value in samples.items()
        if key.startswith("controller_runtime_reconcile_time_seconds_bucket")
    ]
    assert counts == sorted(counts)
    assert counts[-1] == 4


def test_label_values_are_escaped(telemetry: Telemetry) -> None:
    telemetry.metrics.watch_errors_total.add(1, {"kind": 'Po"d\\x\ny', "reason": "r"})
    text = telemetry.prometheus_text()
    assert 'kind="Po\\"d\\\\x\\ny"' in text


def test_build_info_is_always_present(telemetry: Telemetry) -> None:
    samples = parse(telemetry.prometheus_text())
    assert any(key.startswith("karpenter_build_info{version=") for key in samples)


def test_a_span_survives_as_a_traceparent_and_comes_back_as_parent_and_link(
    telemetry: Telemetry,
) -> None:
    tracer = telemetry.tracer
    with tracer.start_as_current_span("create") as created:
        value = traceparent(created)
    assert value is not None
    origin = created.get_span_context()
    assert value.startswith(f"00-{origin.trace_id:032x}-{origin.span_id:016x}-")
    parsed = parse_traceparent(value)
    assert parsed is not None
    assert parsed.is_remote
    assert (parsed.trace_id, parsed.span_id) == (origin.trace_id, origin.span_id)

    with tracer.start_as_current_span("reconcile") as reconcile:
        parent = remote_parent(value)
        with tracer.start_as_current_span("launch", context=parent, links=current_link()) as launch:
            joined = launch.get_span_context()
            linked = [link.context for link in launch.links]  # type: ignore[attr-defined]
        with tracer.start_as_current_span("register", links=links_to(value)) as register:
            linked_back = [link.context.span_id for link in register.links]  # type: ignore[attr-defined]
            in_reconcile = register.get_span_context().trace_id
    assert joined.trace_id == origin.trace_id
    assert [c.span_id for c in linked] == [reconcile.get_span_context().span_id]
    assert linked_back == [origin.span_id]
    assert in_reconcile == reconcile.get_span_context().trace_id != origin.trace_id


def test_a_missing_or_malformed_traceparent_is_ignored() -> None:
    for value in (None, "", "garbage", "00-zz-yy-01", f"00-{'0' * 32}-{'0' * 16}-01"):
        assert parse_traceparent(value) is None
        assert remote_parent(value) is None
        assert links_to(value) == []
    assert traceparent(INVALID_SPAN) is None
    assert current_link() == []


def test_without_an_exporter_spans_are_not_recorded_and_leave_no_traceparent() -> None:
    telemetry = Telemetry.setup(service_name="karpy-test")
    try:
        with telemetry.tracer.start_as_current_span("create") as span:
            assert not span.is_recording()
            assert traceparent(span) is None
    finally:
        telemetry.shutdown()
