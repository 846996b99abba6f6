"""Shared fixtures for runtime tests: a private Telemetry with in-memory span export."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.runtime.telemetry import Telemetry


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def telemetry(spans: InMemorySpanExporter) -> Iterator[Telemetry]:
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=spans)
    yield telemetry
    telemetry.shutdown()
