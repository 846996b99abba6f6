"""The NodeClaim lifecycle controller on the real local cluster: kwok launches real Nodes that
kwok makes Ready, so launch → registration → initialization runs end to end; the fake provider
drives the failure paths (insufficient capacity, create errors, timeouts) under a FakeClock."""

from __future__ import annotations

import datetime
import logging

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.codec import to_dict
from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.controllers.nodeclaim.lifecycle import (
    LAUNCH_TIMEOUT,
    REGISTRATION_TIMEOUT,
    LifecycleController,
)
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry, traceparent
from karpy.state.tracecontext import with_origin
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from karpy_kwok import KwokCloudProvider, KwokOptions
from karpy_kwok.catalog import load_entries
from tests.cluster.nodeclaim.conftest import make_nodeclaim, reconcile_until
from tests.support.clusterview import LiveView
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

FAKE_REF = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="x")
TEAM_TAINT = Taint(key="example.com/team", value="blue", effect=TaintEffect.NO_SCHEDULE)
BOOT_TAINT = Taint(key="example.com/booting", effect=TaintEffect.NO_SCHEDULE)


def _status(nodeclaim: NodeClaim, kind: ConditionType) -> ConditionStatus | None:
    return next((c.status for c in nodeclaim.status.conditions if c.type == kind), None)


class _Settled:
    """The lifecycle controller, reading cluster state caught up with the apiserver."""

    def __init__(self, live: LiveView, provider: CloudProvider, clock: FakeClock) -> None:
        kube = live.kube
        controller = LifecycleController(
            kube, live.view, provider, clock=clock, recorder=Recorder(kube, clock)
        )
        self.reconcile = live.settled(controller.reconcile)


async def _created(kube: KubeClient, nodeclaim: NodeClaim) -> tuple[NodeClaim, FakeClock]:
    stored = await kube.create(NODECLAIMS, nodeclaim)
    assert stored.metadata.creation_timestamp is not None
    return stored, FakeClock(stored.metadata.creation_timestamp)


async def _gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODECLAIMS, name)
    except NotFoundError:
        return True
    return False


async def _remove_taint(kube: KubeClient, node_name: str, key: str) -> None:
    """What a daemon does once it is ready; retried when kwok's heartbeat wins the race."""
    for _ in range(20):
        node = await kube.get(NODES, node_name)
        taints = [to_dict(t) for t in node.spec.taints if t.key != key]
        try:
            await kube.merge_patch(
                NODES,
                node_name,
                {"spec": {"taints": taints or None}},
                resource_version=node.metadata.resource_version,
            )
        except ConflictError:
            continue
        return
    raise AssertionError(f"could not remove taint {key} from {node_name}")


async def test_a_kwok_nodeclaim_launches_registers_and_initializes(
    kube: KubeClient, live: LiveView
) -> None:
    provider = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    _, clock = await _created(
        kube, make_nodeclaim("lc-kwok", taints=(TEAM_TAINT,), startup_taints=(BOOT_TAINT,))
    )
    controller = _Settled(live, provider, clock)

    async def registered() -> bool:
        got = await kube.get(NODECLAIMS, "lc-kwok")
        return _status(got, ConditionType.REGISTERED) is ConditionStatus.TRUE

    await reconcile_until(controller.reconcile, "lc-kwok", registered)
    claim = await kube.get(NODECLAIMS, "lc-kwok")
    assert wk.FINALIZER_TERMINATION in claim.metadata.finalizers
    assert _status(claim, ConditionType.LAUNCHED) is ConditionStatus.TRUE
    assert claim.status.provider_id == "kwok://lc-kwok"
    assert claim.status.node_name == "lc-kwok"
    assert claim.status.capacity["cpu"]
    # What the provider chose is recorded as labels; the NodeClaim's own labels are kept.
    assert claim.metadata.labels[wk.LABEL_INSTANCE_TYPE]
    assert claim.metadata.labels[wk.LABEL_CAPACITY_TYPE] in {
        wk.CAPACITY_TYPE_SPOT,
        wk.CAPACITY_TYPE_ON_DEMAND,
    }
    assert claim.metadata.labels["example.com/team"] == "blue"

    node = await kube.get(NODES, "lc-kwok")
    assert node.metadata.labels[wk.LABEL_NODE_REGISTERED] == "true"
    assert node.metadata.labels["example.com/team"] == "blue"
    assert node.metadata.labels[wk.LABEL_NODEPOOL] == "default"
    assert node.metadata.annotations["example.com/owner"] == "tests"
    assert wk.FINALIZER_TERMINATION in node.metadata.finalizers
    keys = {(t.key, t.effect) for t in node.spec.taints}
    assert (wk.TAINT_UNREGISTERED_KEY, TaintEffect.NO_EXECUTE) not in keys
    assert (TEAM_TAINT.key, TEAM_TAINT.effect) in keys
    assert (BOOT_TAINT.key, BOOT_TAINT.effect) in keys

    # The startup taint holds initialization back until something removes it.
    await controller.reconcile("lc-kwok")
    claim = await kube.get(NODECLAIMS, "lc-kwok")
    assert _status(claim, ConditionType.INITIALIZED) is ConditionStatus.UNKNOWN
    assert _status(claim, ConditionType.READY) is ConditionStatus.UNKNOWN
    await _remove_taint(kube, "lc-kwok", BOOT_TAINT.key)

    async def ready() -> bool:
        got = await kube.get(NODECLAIMS, "lc-kwok")
        return _status(got, ConditionType.READY) is ConditionStatus.TRUE

    await reconcile_until(controller.reconcile, "lc-kwok", ready)
    claim = await kube.get(NODECLAIMS, "lc-kwok")
    assert _status(claim, ConditionType.INITIALIZED) is ConditionStatus.TRUE
    node = await kube.get(NODES, "lc-kwok")
    assert node.metadata.labels[wk.LABEL_NODE_INITIALIZED] == "true"


@pytest.mark.parametrize(
    ("error", "reason", "name"),
    [
        pytest.param(
            InsufficientCapacityError("no capacity"),
            "InsufficientCapacityError",
            "lc-ice",
            id="insufficient-capacity",
        ),
        pytest.param(
            NodeClassNotReadyError("class not ready"),
            "NodeClassNotReady",
            "lc-noclass",
            id="nodeclass-not-ready",
        ),
    ],
)
async def test_a_nodeclaim_that_cannot_launch_is_deleted(
    kube: KubeClient,
    live: LiveView,
    kube_http: KubeHTTP,
    error: CloudProviderError,
    reason: str,
    name: str,
) -> None:
    provider = FakeCloudProvider()
    provider.next_create_error = error
    stored, clock = await _created(kube, make_nodeclaim(name, ref=FAKE_REF))
    controller = _Settled(live, provider, clock)
    await reconcile_until(controller.reconcile, name, lambda: _gone(kube, name))
    assert len(provider.create_calls) == 1
    assert provider.created == {}
    assert ("Warning", reason) in kube_http.events_about(stored.metadata.uid or "")


async def test_a_create_error_is_a_condition_then_the_launch_times_out(
    kube: KubeClient, live: LiveView
) -> None:
    provider = FakeCloudProvider()
    provider.next_create_error = CreateError(
        "quota", condition_reason="QuotaExceeded", condition_message="vCPU quota exceeded"
    )
    _, clock = await _created(kube, make_nodeclaim("lc-timeout", ref=FAKE_REF))
    controller = _Settled(live, provider, clock)
    await controller.reconcile("lc-timeout")  # finalizer
    await controller.reconcile("lc-timeout")  # the failed create
    claim = await kube.get(NODECLAIMS, "lc-timeout")
    launched = next(c for c in claim.status.conditions if c.type == ConditionType.LAUNCHED)
    assert launched.status is ConditionStatus.UNKNOWN
    assert (launched.reason, launched.message) == ("QuotaExceeded", "vCPU quota exceeded")
    # Creates keep failing (the cap allows none); five minutes after creation it is deleted.
    provider.allowed_create_calls = 0
    clock.step(LAUNCH_TIMEOUT)
    await reconcile_until(controller.reconcile, "lc-timeout", lambda: _gone(kube, "lc-timeout"))
    assert len(provider.create_calls) == 1


async def test_a_node_that_never_joins_times_out_and_the_instance_is_deleted(
    kube: KubeClient,
    live: LiveView,
) -> None:
    provider = FakeCloudProvider()
    _, clock = await _created(kube, make_nodeclaim("lc-noreg", ref=FAKE_REF))
    controller = _Settled(live, provider, clock)
    await controller.reconcile("lc-noreg")
    result = await controller.reconcile("lc-noreg")
    assert result.requeue_after is not None
    claim = await kube.get(NODECLAIMS, "lc-noreg")
    assert _status(claim, ConditionType.LAUNCHED) is ConditionStatus.TRUE
    assert _status(claim, ConditionType.REGISTERED) is ConditionStatus.UNKNOWN
    assert len(provider.created) == 1
    clock.step(REGISTRATION_TIMEOUT - datetime.timedelta(seconds=1))
    await controller.reconcile("lc-noreg")
    assert not await _gone(kube, "lc-noreg")
    clock.step(datetime.timedelta(seconds=1))
    await reconcile_until(controller.reconcile, "lc-noreg", lambda: _gone(kube, "lc-noreg"))
    # Finalization called Delete until the provider said the instance was gone.
    assert provider.created == {}
    assert len(provider.delete_calls) == 2


async def test_no_launch_happens_before_the_finalizer_is_on(
    kube: KubeClient, live: LiveView
) -> None:
    provider = FakeCloudProvider()
    _, clock = await _created(kube, make_nodeclaim("lc-fin", ref=FAKE_REF))
    controller = _Settled(live, provider, clock)
    await controller.reconcile("lc-fin")
    claim = await kube.get(NODECLAIMS, "lc-fin")
    assert claim.metadata.finalizers == (wk.FINALIZER_TERMINATION,)
    assert provider.create_calls == []
    await controller.reconcile("lc-fin")
    assert len(provider.create_calls) == 1


@pytest.mark.parametrize(
    "sync_taints", [pytest.param(True, id="sync"), pytest.param(False, id="do-not-sync")]
)
async def test_registration_takes_over_the_node_with_the_nodeclaims_provider_id(
    kube: KubeClient, live: LiveView, caplog: pytest.LogCaptureFixture, sync_taints: bool
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.controllers.nodeclaim.lifecycle")
    name = f"lc-hand-{'sync' if sync_taints else 'nosync'}"
    provider = FakeCloudProvider()
    _, clock = await _created(kube, make_nodeclaim(name, ref=FAKE_REF, taints=(TEAM_TAINT,)))
    controller = _Settled(live, provider, clock)
    await controller.reconcile(name)
    await controller.reconcile(name)
    claim = await kube.get(NODECLAIMS, name)
    provider_id = claim.status.provider_id
    assert provider_id is not None
    # The instance joins as a Node of another name, as a real kubelet would register it.
    existing = Taint(key="example.com/existing", effect=TaintEffect.NO_SCHEDULE)
    labels = {} if sync_taints else {wk.LABEL_DO_NOT_SYNC_TAINTS: "true"}
    await kube.create(
        NODES,
        Node(
            metadata=ObjectMeta(name=f"{name}-node", labels=labels),
            spec=NodeSpec(
                provider_id=provider_id,
                taints=(
                    existing,
                    Taint(key=wk.TAINT_UNREGISTERED_KEY, effect=TaintEffect.NO_EXECUTE),
                ),
            ),
        ),
    )

    async def registered() -> bool:
        got = await kube.get(NODECLAIMS, name)
        return _status(got, ConditionType.REGISTERED) is ConditionStatus.TRUE

    await reconcile_until(controller.reconcile, name, registered)
    claim = await kube.get(NODECLAIMS, name)
    assert claim.status.node_name == f"{name}-node"
    node = await kube.get(NODES, f"{name}-node")
    assert node.metadata.labels[wk.LABEL_NODE_REGISTERED] == "true"
    assert (
        node.metadata.labels[wk.LABEL_INSTANCE_TYPE]
        == claim.metadata.labels[wk.LABEL_INSTANCE_TYPE]
    )
    assert wk.FINALIZER_TERMINATION in node.metadata.finalizers
    keys = {t.key for t in node.spec.taints}
    assert wk.TAINT_UNREGISTERED_KEY not in keys
    assert existing.key in keys
    assert (TEAM_TAINT.key in keys) is sync_taints
    record = next(r for r in caplog.records if r.getMessage() == "registered nodeclaim")
    fields = vars(record)
    assert fields["node"] == f"{name}-node"
    assert fields["provider-id"] == provider_id
    assert fields["instance-type"] == claim.metadata.labels[wk.LABEL_INSTANCE_TYPE]
    assert fields["zone"] == claim.metadata.labels[wk.LABEL_TOPOLOGY_ZONE]
    assert fields["capacity-type"] == claim.metadata.labels[wk.LABEL_CAPACITY_TYPE]


async def test_a_nodeclaims_lifecycle_continues_the_trace_recorded_on_it(
    kube: KubeClient, live: LiveView
) -> None:
    # The span that created the NodeClaim belongs to another process (a batch before a
    # restart): all that reaches this controller is the annotation on the API server.
    earlier = Telemetry.setup(service_name="before-restart", span_exporter=InMemorySpanExporter())
    with earlier.tracer.start_as_current_span("create nodeclaim") as created:
        claim = with_origin(make_nodeclaim("lc-traced"), created)
        recorded = traceparent(created)
    earlier.shutdown()
    origin = created.get_span_context()
    stored, clock = await _created(kube, claim)
    assert stored.metadata.annotations[wk.ANNOTATION_TRACEPARENT] == recorded

    spans = InMemorySpanExporter()
    telemetry = Telemetry.setup(service_name="after-restart", span_exporter=spans)
    provider = InstrumentedCloudProvider(
        KwokCloudProvider(kube, load_entries(), options=KwokOptions()), telemetry
    )
    controller = LifecycleController(
        kube,
        live.view,
        provider,
        clock=clock,
        recorder=Recorder(kube, clock),
        tracer=telemetry.tracer,
    )
    reconcile = live.settled(controller.reconcile)

    async def ready() -> bool:
        with telemetry.tracer.start_as_current_span("reconcile nodeclaim.lifecycle"):
            await reconcile("lc-traced")
        got = await kube.get(NODECLAIMS, "lc-traced")
        return _status(got, ConditionType.READY) is ConditionStatus.TRUE

    await eventually(ready, within=30, interval=0.1)
    finished = {s.name: s for s in spans.get_finished_spans()}
    launch = finished["launch nodeclaim"]
    assert launch.parent is not None
    assert (launch.parent.trace_id, launch.parent.span_id) == (origin.trace_id, origin.span_id)
    assert finished["cloudprovider.Create"].parent == launch.context
    assert len(launch.links) == 1  # back to the reconcile that ran it
    assert launch.attributes is not None
    assert launch.attributes["karpy.provider_id"] == "kwok://lc-traced"
    for name in ("register nodeclaim", "initialize nodeclaim"):
        span = finished[name]
        assert span.context.trace_id != origin.trace_id  # its reconcile's own trace
        assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
            (origin.trace_id, origin.span_id)
        ]
    telemetry.shutdown()


async def test_a_nodeclaim_deleted_before_its_launch_was_recorded_takes_its_node_along(
    kube: KubeClient, live: LiveView
) -> None:
    """A process launched the NodeClaim and was killed before writing its providerID; the
    NodeClaim is then deleted. The next process's finalizer must not leave the Node behind."""
    provider = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    _, clock = await _created(kube, make_nodeclaim("lc-unrecorded"))
    controller = _Settled(live, provider, clock)
    await controller.reconcile("lc-unrecorded")  # the finalizer
    with_finalizer = await kube.get(NODECLAIMS, "lc-unrecorded")
    assert wk.FINALIZER_TERMINATION in with_finalizer.metadata.finalizers
    # The killed process's launch: the instance exists, the status never said so.
    await KwokCloudProvider(kube, load_entries(), options=KwokOptions()).create(with_finalizer)
    assert (await kube.get(NODECLAIMS, "lc-unrecorded")).status.provider_id is None
    await kube.delete(NODECLAIMS, "lc-unrecorded")
    await reconcile_until(
        controller.reconcile, "lc-unrecorded", lambda: _gone(kube, "lc-unrecorded")
    )

    async def node_gone() -> bool:
        try:
            await kube.get(NODES, "lc-unrecorded")
        except NotFoundError:
            return True
        return False

    assert await node_gone()
