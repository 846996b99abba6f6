"""Informers over kinds of another cluster, for a provider whose machines are objects there.

The operator informs the cluster karpy runs against into its own ClusterState (wiring). A
provider whose machines are objects of a second cluster — Cluster API's MachineDeployments and
Machines in its management cluster — needs the same thing there: list once, watch, read from
memory, hear of each change, instead of a list per call. `InformedKinds` is karpy's own informers
(`karpy.state.informers` over `karpy.kube.watch`: paginated lists, bookmarks, relist on 410
Gone, backoff on failure) on the provider's client, into a ClusterState of its own, read through
a `ClusterView` like every other controller's reads.

Its owner starts it and closes it (a provider: on its first read or in its factory, and in
`aclose`); in between it owns one task per kind and no other. `wait_changed` is how a reader waits
for another controller's write to show (a Machine Cluster API creates for a MachineDeployment
karpy scaled) without polling the apiserver; reads may be a few milliseconds stale, so writes
stay optimistic (at the resourceVersion read).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.metrics import NoOpMeter

from karpy.kube.client import KubeClient
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Metrics
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

METER: Final = "karpy.state.informed"


class InformedKinds:
    """`kinds` of the cluster `client` reaches (in `namespace`, or every namespace), kept in
    memory by karpy's informers from `start` until `aclose`. Side effects: one list and one
    watch per kind at a time, each retried with the watch backoff of `settings`."""

    def __init__(
        self,
        client: KubeClient,
        kinds: Iterable[ResourceKind[Any]],
        *,
        namespace: str | None = None,
        settings: WatchingOptions | None = None,
    ) -> None:
        # Instruments of their own, never the operator's: a second ClusterState would report
        # its own sync on the operator's cluster_state_synced gauge.
        self._metrics = Metrics.create(NoOpMeter(METER))
        self._state = ClusterState(metrics=self._metrics)
        self._informers = [
            Informer(
                client,
                self._state.register(kind),
                state=self._state,
                settings=settings or WatchingOptions(),
                metrics=self._metrics,
                namespace=namespace,
            )
            for kind in kinds
        ]
        self._view = ClusterView(self._state)
        self._tasks: list[asyncio.Task[None]] = []
        self._changes = 0
        self._changed = asyncio.Event()
        for informer in self._informers:
            informer.subscribe(self._on_change)

    @property
    def view(self) -> ClusterView:
        """The informed objects (`get` and `objects` by kind); empty until `synced`."""
        return self._view

    @property
    def synced(self) -> bool:
        """True once every kind has been listed (and stays so while a watch reconnects)."""
        return self._state.synced

    @property
    def started(self) -> bool:
        return bool(self._tasks)

    @property
    def changes(self) -> int:
        """How many changes the informers have applied: pass it to `wait_changed`."""
        return self._changes

    def _on_change(self, _event: Event[Any]) -> None:
        self._changes += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def start(self) -> None:
        """Start one informer task per kind (once; later calls do nothing)."""
        if self._tasks:
            return
        for informer in self._informers:
            task = asyncio.create_task(informer.run(), name=f"informed:{informer.kind}")
            task.add_done_callback(_report)
            self._tasks.append(task)

    async def wait_synced(self, within: float) -> None:
        """Start if need be and wait until every kind has been listed; TimeoutError after
        `within` seconds (the cluster unreachable, or the kinds not served or not readable)."""
        self.start()
        if self._state.synced:
            return
        async with asyncio.timeout(within):
            await self._state.wait_synced()

    async def wait_changed(self, since: int, within: float) -> bool:
        """Wait until a change after `since` (a value of `changes`) has been applied, at most
        `within` seconds; whether one was."""
        if self._changes > since:
            return True
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(within, 0.0)):
                await changed.wait()
        return self._changes > since

    async def aclose(self) -> None:
        """Stop the informers and wait for their tasks to end."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            # Only the cancellation asked for here is absorbed: a cancellation of the caller
            # while it waits still propagates from `await task`'s own wait.
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception:
                log.exception("informer ended with an error")


def _report(task: asyncio.Task[None]) -> None:
    """An informer that ends while it should run is a bug: say so (its readers then time out)."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error(
            "informer stopped",
            extra={"task": task.get_name(), "error": repr(error)},
        )
