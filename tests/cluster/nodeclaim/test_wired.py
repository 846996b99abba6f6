"""The lifecycle and termination controllers run as the operator runs them: the manager feeds
their declared watches from the informers into their work queues, and runs them. A kwok
NodeClaim becomes Ready with no hand-driven reconcile, and deleting it removes its Node and
instance."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType
from karpy.controllers.node.termination import TerminationController
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import (
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODDISRUPTIONBUDGETS,
    PODS,
    VOLUME_ATTACHMENTS,
)
from karpy.manager import Manager
from karpy.runtime.backoff import Backoff
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.view import ClusterView
from karpy_kwok import KwokCloudProvider, KwokOptions
from karpy_kwok.catalog import load_entries
from tests.cluster.nodeclaim.conftest import make_nodeclaim
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


async def test_declared_controllers_carry_a_nodeclaim_through_its_life(
    kube: KubeClient,
) -> None:
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=InMemorySpanExporter())
    clock = SystemClock()
    provider = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    state = ClusterState(metrics=telemetry.metrics)
    informers: dict[str, Informer[Any]] = {
        kind.kind: Informer(
            kube,
            state.register(kind),
            state=state,
            settings=WatchingOptions(),
            metrics=telemetry.metrics,
        )
        for kind in (
            NODES,
            PODS,
            NODECLAIMS,
            NODEPOOLS,
            VOLUME_ATTACHMENTS,
            PERSISTENT_VOLUME_CLAIMS,
            PODDISRUPTIONBUDGETS,
        )
    }
    view = ClusterView(state)
    lifecycle = LifecycleController(
        kube, view, provider, clock=clock, recorder=Recorder(kube, clock)
    )
    termination = TerminationController(
        kube, view, provider, clock=clock, recorder=Recorder(kube, clock)
    )
    runners = Manager(
        telemetry=telemetry, backoff=Backoff(base=0.2, cap=2.0), synced=state.wait_synced
    ).loops((lifecycle.spec(), termination.spec()), informers)

    async def ready() -> bool:
        claim = await kube.get(NODECLAIMS, "wired")
        return any(
            c.type == ConditionType.READY and c.status is ConditionStatus.TRUE
            for c in claim.status.conditions
        )

    async def gone() -> bool:
        try:
            await kube.get(NODECLAIMS, "wired")
        except NotFoundError:
            try:
                await kube.get(NODES, "wired")
            except NotFoundError:
                return True
        return False

    try:
        async with asyncio.TaskGroup() as group:
            watching = [
                group.create_task(i.run(), name=f"informer-{k}") for k, i in informers.items()
            ]
            running = [group.create_task(r.run(), name=r.name) for r in runners]
            try:
                async with asyncio.timeout(30):
                    await state.wait_synced()
                await kube.create(NODECLAIMS, make_nodeclaim("wired"))
                await eventually(ready, within=60)
                node = await kube.get(NODES, "wired")
                assert node.metadata.labels[wk.LABEL_NODE_INITIALIZED] == "true"
                await kube.delete(NODECLAIMS, "wired")
                await eventually(gone, within=60)
            finally:
                for runner in runners:
                    runner.stop()
                for task in watching:
                    task.cancel()
            for task in running:
                await task
    finally:
        telemetry.shutdown()
