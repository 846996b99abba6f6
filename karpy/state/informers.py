"""Informers: one watch task per kind, feeding ClusterState and notifying controllers.

An informer is the only writer of its kind's store. It consumes `infinite_watch`, replaces the store
on every list (turning the difference into events, so a controller hears about objects deleted
while the watch was down) and applies each watch event. Subscribers hear only of changes
(karpy.state.generation): a Node's heartbeat, re-posted every few seconds to a few minutes per
Node and carrying nothing else, updates the store and wakes no controller — at rest those are
nearly all the events there are, and each woke every controller watching Nodes. Subscribers
are synchronous, non-blocking callbacks (`Trigger.fire`, `WorkQueue.add`) so a slow controller
can never stall the stream (house rule 8).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from karpy.kube.client import KubeClient
from karpy.kube.resources import Listed
from karpy.kube.watch import Event, infinite_watch
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Metrics
from karpy.state.cluster import ClusterState, Store

T = TypeVar("T")

log = logging.getLogger(__name__)

Subscriber = Callable[[Event[T]], None]


class Informer(Generic[T]):
    """Keeps `store` in step with the apiserver; runs until cancelled."""

    def __init__(
        self,
        client: KubeClient,
        store: Store[T],
        *,
        state: ClusterState,
        settings: WatchingOptions,
        metrics: Metrics,
        namespace: str | None = None,
    ) -> None:
        self._client = client
        self.store = store
        self._state = state
        self._settings = settings
        self._metrics = metrics
        self._namespace = namespace
        self._subscribers: list[Subscriber[T]] = []

    @property
    def kind(self) -> str:
        return self.store.kind.kind

    def subscribe(self, callback: Subscriber[T]) -> None:
        """Call `callback(event)` for every change; it must not block or raise."""
        self._subscribers.append(callback)

    async def run(self) -> None:
        """Watch forever (until cancelled)."""
        async for entry in infinite_watch(
            self._client,
            self.store.kind,
            settings=self._settings,
            metrics=self._metrics,
            namespace=self._namespace,
        ):
            if isinstance(entry, Listed):
                changes = self.store.replace(entry.items)
                self._state.mark_listed()
                log.debug(
                    "listed",
                    extra={"kind": self.kind, "count": len(self.store), "changes": len(changes)},
                )
                for change in changes:
                    self._notify(change)
            elif self.store.apply(entry):
                self._notify(entry)

    def _notify(self, event: Event[T]) -> None:
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                # A broken subscriber is a bug, but it must not stop the other subscribers or the
                # stream that keeps cluster state current.
                log.exception("informer subscriber failed", extra={"kind": self.kind})
