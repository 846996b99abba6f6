"""InstrumentedCloudProvider: one span and one duration sample per call, errors counted by type.

The wrapped provider is the FakeCloudProvider; spans go to an in-memory exporter and metrics to
the Telemetry's in-memory reader, so the test reads exactly what an operator would export.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClaimRequirement,
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.cloudprovider import (
    CloudProvider,
    DriftReason,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)
from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.runtime.telemetry import Telemetry
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider

REF = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="default")


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def telemetry(spans: InMemorySpanExporter) -> Iterator[Telemetry]:
    telemetry = Telemetry.setup(
        service_name="karpy-test", span_exporter=spans, in_memory_metrics=True
    )
    yield telemetry
    telemetry.shutdown()


@pytest.fixture
def fake() -> FakeCloudProvider:
    return FakeCloudProvider()


@pytest.fixture
def provider(fake: FakeCloudProvider, telemetry: Telemetry) -> InstrumentedCloudProvider:
    return InstrumentedCloudProvider(fake, telemetry)


def _nodeclaim(name: str, *, instance_type: str | None = None) -> NodeClaim:
    reqs: tuple[NodeClaimRequirement, ...] = ()
    if instance_type is not None:
        reqs = (
            NodeClaimRequirement(
                key=wk.LABEL_INSTANCE_TYPE, operator=RequirementOperator.IN, values=(instance_type,)
            ),
        )
    return NodeClaim(
        metadata=ObjectMeta(name=name), spec=NodeClaimSpec(requirements=reqs, node_class_ref=REF)
    )


def _nodepool(name: str) -> NodePool:
    requirement = NodeSelectorRequirementWithMinValues(
        key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
    )
    template = NodeClaimTemplate(
        spec=NodeClaimTemplateSpec(requirements=(requirement,), node_class_ref=REF)
    )
    return NodePool(metadata=ObjectMeta(name=name), spec=NodePoolSpec(template=template))


def _only(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in spans.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


def _points(telemetry: Telemetry, metric: str) -> list[Any]:
    assert telemetry.reader is not None
    data = telemetry.reader.get_metrics_data()
    assert data is not None
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for m in scope.metrics
        if m.name == metric
        for point in m.data.data_points
    ]


def test_the_wrapper_is_a_cloud_provider(provider: InstrumentedCloudProvider) -> None:
    assert isinstance(provider, CloudProvider)
    assert provider.name == "fake"
    assert provider.supported_node_classes() == (TEST_NODE_CLASS,)
    assert provider.repair_policies() == ()


async def test_create_span_carries_nodeclaim_provider_and_provider_id(
    provider: InstrumentedCloudProvider, spans: InMemorySpanExporter, telemetry: Telemetry
) -> None:
    launched = await provider.create(_nodeclaim("claim-a"))
    span = _only(spans, "cloudprovider.Create")
    assert span.attributes is not None
    assert span.attributes["karpy.provider"] == "fake"
    assert span.attributes["karpy.nodeclaim"] == "claim-a"
    assert span.attributes["karpy.provider_id"] == launched.status.provider_id
    assert span.status.status_code is StatusCode.UNSET
    (point,) = _points(telemetry, "karpenter_cloudprovider_duration_seconds")
    assert dict(point.attributes) == {"method": "Create", "provider": "fake"}
    assert point.count == 1
    assert _points(telemetry, "karpenter_cloudprovider_errors_total") == []


async def test_every_method_has_its_span_and_duration(
    provider: InstrumentedCloudProvider, spans: InMemorySpanExporter, telemetry: Telemetry
) -> None:
    launched = await provider.create(_nodeclaim("claim-b"))
    provider_id = launched.status.provider_id
    assert provider_id is not None
    assert (await provider.get(provider_id)).status.provider_id == provider_id
    assert len(await provider.list()) == 1
    types = await provider.get_instance_types(_nodepool("pool"))
    assert await provider.is_drifted(launched) is None
    await provider.delete(launched)
    names = [s.name for s in spans.get_finished_spans()]
    assert names == [
        "cloudprovider.Create",
        "cloudprovider.Get",
        "cloudprovider.List",
        "cloudprovider.GetInstanceTypes",
        "cloudprovider.IsDrifted",
        "cloudprovider.Delete",
    ]
    listed = _only(spans, "cloudprovider.GetInstanceTypes")
    assert listed.attributes is not None
    assert listed.attributes["karpy.instance_types"] == len(types)
    assert listed.attributes["karpy.nodepool"] == "pool"
    deleted = _only(spans, "cloudprovider.Delete")
    assert deleted.attributes is not None
    assert deleted.attributes["karpy.provider_id"] == provider_id
    methods = {
        p.attributes["method"]
        for p in _points(telemetry, "karpenter_cloudprovider_duration_seconds")
    }
    assert methods == {"Create", "Get", "List", "GetInstanceTypes", "IsDrifted", "Delete"}


async def test_errors_are_recorded_on_the_span_and_counted_by_type(
    provider: InstrumentedCloudProvider,
    fake: FakeCloudProvider,
    spans: InMemorySpanExporter,
    telemetry: Telemetry,
) -> None:
    fake.next_create_error = InsufficientCapacityError("no capacity in test-zone-1")
    with pytest.raises(InsufficientCapacityError):
        await provider.create(_nodeclaim("claim-c"))
    span = _only(spans, "cloudprovider.Create")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "InsufficientCapacityError"
    assert [e.name for e in span.events] == ["exception"]
    (error,) = _points(telemetry, "karpenter_cloudprovider_errors_total")
    assert dict(error.attributes) == {
        "method": "Create",
        "provider": "fake",
        "error": "InsufficientCapacityError",
    }
    assert error.value == 1
    (duration,) = _points(telemetry, "karpenter_cloudprovider_duration_seconds")
    assert duration.count == 1


async def test_not_found_is_counted_but_not_a_failed_span(
    provider: InstrumentedCloudProvider, spans: InMemorySpanExporter, telemetry: Telemetry
) -> None:
    launched = await provider.create(_nodeclaim("claim-d"))
    await provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(launched)
    failed = [s for s in spans.get_finished_spans() if s.name == "cloudprovider.Delete"][-1]
    assert failed.status.status_code is StatusCode.UNSET
    assert [e.name for e in failed.events] == ["exception"]
    (error,) = _points(telemetry, "karpenter_cloudprovider_errors_total")
    assert error.attributes["error"] == "NodeClaimNotFoundError"


async def test_drift_reason_is_an_attribute(
    provider: InstrumentedCloudProvider, fake: FakeCloudProvider, spans: InMemorySpanExporter
) -> None:
    launched = await provider.create(_nodeclaim("claim-e"))
    assert launched.status.provider_id is not None
    fake.drifted[launched.status.provider_id] = DriftReason("NodeClassDrift")
    assert await provider.is_drifted(launched) == "NodeClassDrift"
    span = _only(spans, "cloudprovider.IsDrifted")
    assert span.attributes is not None
    assert span.attributes["karpy.drifted"] == "NodeClassDrift"
