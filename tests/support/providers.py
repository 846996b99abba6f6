"""A provider's declared kinds and loops, run as the operator runs them, without an operator.

Providers do not run their own loops: they declare them (`karpy.manager.ProviderExtension`) and
the operator's `karpy.manager.Manager` runs them. Tests that exercise a provider's loops on the
real control plane use this: real informers feed a ClusterState whose view the provider reads,
and the declared loops run through the same manager the operator uses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from karpy.kube.client import KubeClient
from karpy.kube.resources import ResourceKind
from karpy.manager import Loop, Manager, ProviderExtension
from karpy.manager.declare import kinds_of
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import ReconcileOptions, WatchingOptions
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.view import ClusterView

SYNC_TIMEOUT = 30.0


class Informed:
    """A ClusterState fed by real informers of the kinds `inform` is given."""

    def __init__(self, kube: KubeClient, telemetry: Telemetry) -> None:
        self._kube = kube
        self._telemetry = telemetry
        self.state = ClusterState(metrics=telemetry.metrics)
        self.view = ClusterView(self.state)
        self.informers: dict[str, Informer[Any]] = {}

    def inform(self, *kinds: ResourceKind[Any]) -> None:
        """Keep `kinds` in cluster state (before `running()`)."""
        for kind in kinds:
            if kind.kind not in self.informers:
                self.informers[kind.kind] = Informer(
                    self._kube,
                    self.state.register(kind),
                    state=self.state,
                    settings=WatchingOptions(),
                    metrics=self._telemetry.metrics,
                )

    def loops(self, extension: ProviderExtension, *, backoff: Backoff | None = None) -> list[Loop]:
        """The extension's loops, built as the operator builds them (its kinds, and the kinds
        its loops watch, informed)."""
        self.inform(*extension.kinds, *(k for c in extension.controllers for k in kinds_of(c)))
        return Manager(
            telemetry=self._telemetry,
            backoff=backoff if backoff is not None else ReconcileOptions().backoff,
            synced=self.state.wait_synced,
        ).loops(extension.controllers, self.informers)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ClusterView]:
        """Run the informers until the block ends; enter once every kind has been listed."""
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(informer.run(), name=f"informer-{name}")
                for name, informer in self.informers.items()
            ]
            try:
                async with asyncio.timeout(SYNC_TIMEOUT):
                    await self.state.wait_synced()
                yield self.view
            finally:
                for task in tasks:
                    task.cancel()


async def run_loops(controllers: Sequence[Loop], *, prefix: str = "") -> None:
    """Run `controllers` until cancelled, each as a task named `prefix` + its name."""
    async with asyncio.TaskGroup() as group:
        for controller in controllers:
            group.create_task(controller.run(), name=f"{prefix}{controller.name}")


async def run_extension(
    extension: ProviderExtension,
    *,
    telemetry: Telemetry,
    backoff: Backoff | None = None,
    prefix: str = "",
) -> None:
    """Run an extension's loops that need no informers (periodic passes) until cancelled."""
    await run_loops(
        Manager(
            telemetry=telemetry,
            backoff=backoff if backoff is not None else ReconcileOptions().backoff,
            synced=None,
        ).loops(extension.controllers, {}),
        prefix=prefix,
    )
