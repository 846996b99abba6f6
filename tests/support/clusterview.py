"""Cluster state kept by real informers, for tests that drive a controller's reconcile by hand.

Controllers read through a `ClusterView`, which trails the apiserver by a watch event. A test that
calls `reconcile` itself (instead of letting informer events queue it) first waits until the view
has caught up with the apiserver (`LiveView.caught_up`), so each hand-driven reconcile reads what
the previous one wrote, as the event that the write causes would have it in the running operator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.kube.resources import ResourceKind
from karpy.runtime.options import WatchingOptions
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.view import ClusterView

CORE_KINDS: tuple[ResourceKind[Any], ...] = (NODES, PODS, NODECLAIMS)


def _versions(objects: Sequence[Any]) -> dict[tuple[str, str], int]:
    return {
        (o.metadata.namespace or "", o.metadata.name or ""): int(o.metadata.resource_version or 0)
        for o in objects
    }


@attrs.define
class LiveView:
    """A ClusterView fed by running informers, and a way to wait for it to catch up."""

    kube: KubeClient
    view: ClusterView
    kinds: tuple[ResourceKind[Any], ...]

    async def caught_up(self, *, within: float = 10.0) -> None:
        """Wait until the view holds, for every kind, what a list from the apiserver holds now:
        each listed object at its listed version or newer, and nothing deleted before the list."""
        async with asyncio.timeout(within):
            for kind in self.kinds:
                listed = await self.kube.list(kind)
                want = {i.ref.key: int(i.ref.resource_version) for i in listed.items}
                horizon = int(listed.resource_version)
                while True:
                    have = _versions(self.view.objects(kind))
                    if all(have.get(key, -1) >= rv for key, rv in want.items()) and all(
                        key in want or rv > horizon for key, rv in have.items()
                    ):
                        break
                    await asyncio.sleep(0.02)

    def settled(
        self, reconcile: Callable[[str], Awaitable[Result]]
    ) -> Callable[[str], Awaitable[Result]]:
        """`reconcile`, run only once the view has caught up with the apiserver."""

        async def run(name: str) -> Result:
            await self.caught_up()
            return await reconcile(name)

        return run


@asynccontextmanager
async def live_view(
    kube: KubeClient, kinds: tuple[ResourceKind[Any], ...] = CORE_KINDS
) -> AsyncIterator[LiveView]:
    """Informers for `kinds` running into a ClusterState until the block ends; synced on entry."""
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=InMemorySpanExporter())
    state = ClusterState(metrics=telemetry.metrics)
    informers = [
        Informer(
            kube,
            state.register(kind),
            state=state,
            settings=WatchingOptions(),
            metrics=telemetry.metrics,
        )
        for kind in kinds
    ]
    tasks = [asyncio.create_task(i.run(), name=f"informer-{i.kind}") for i in informers]
    try:
        async with asyncio.timeout(30):
            await state.wait_synced()
        yield LiveView(kube, ClusterView(state), kinds)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        telemetry.shutdown()
