"""Runs declared controllers: one place owns queues, workers, backoff, spans and shutdown.

`Manager.loops()` turns each `Controller` into a `WorkQueue` with a `Runner` and each
`Singleton` into a `SingletonLoop` (karpy.runtime.reconciler: per-key serial work, backoff,
spans, metrics), and subscribes each declared `Watch` to the informer of its kind. Every loop
waits for cluster state to sync before its first reconcile — as controller-runtime waits for its
caches — so no controller judges the cluster from a half-listed store; events that arrive before
are queued, not lost. The supervisor (`karpy.operator.supervisor`) runs the loops on the leader
and stops them in order.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from karpy.kube.watch import Event
from karpy.manager.declare import Controller, Declaration, Singleton, Watch, kinds_of
from karpy.runtime.backoff import Backoff
from karpy.runtime.reconciler import Runner, SingletonLoop, WorkQueue
from karpy.runtime.telemetry import Telemetry
from karpy.state.informers import Informer, Subscriber

log = logging.getLogger(__name__)

Synced = Callable[[], Coroutine[Any, Any, None]]


class Loop(abc.ABC):
    """One declared controller, running: `run()` works until `stop()` and in-flight work is
    done. The supervisor needs nothing else of it."""

    def __init__(self, name: str, synced: Synced | None) -> None:
        self.name = name
        self._synced = synced
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Wait for cluster state to sync (returning at once if stopped first), then work."""
        if self._synced is not None:
            async with asyncio.TaskGroup() as group:
                synced = group.create_task(self._synced(), name=f"{self.name}-sync")
                stopping = group.create_task(self._stopping.wait(), name=f"{self.name}-stop")
                await asyncio.wait({synced, stopping}, return_when=asyncio.FIRST_COMPLETED)
                synced.cancel()
                stopping.cancel()
            if self._stopping.is_set():
                return
        await self._work()

    def stop(self) -> None:
        """Stop taking new work; `run()` returns once in-flight work is done."""
        self._stopping.set()
        self._stop()

    @abc.abstractmethod
    async def _work(self) -> None:
        """Work until stopped."""

    @abc.abstractmethod
    def _stop(self) -> None:
        """Stop taking new work."""


class KeyedLoop(Loop):
    """A `Controller` on its work queue."""

    def __init__(
        self,
        declaration: Controller,
        *,
        telemetry: Telemetry,
        backoff: Backoff,
        synced: Synced | None,
    ) -> None:
        super().__init__(declaration.name, synced)
        self.queue: WorkQueue[str] = WorkQueue(declaration.name, telemetry=telemetry)
        self.runner: Runner[str] = Runner(
            declaration.name,
            declaration.reconcile,
            queue=self.queue,
            telemetry=telemetry,
            backoff=backoff,
            workers=declaration.workers,
            describe=declaration.describe,
            done_on=declaration.done_on,
            requeue_on=declaration.requeue_on,
        )
        self._initial = declaration.initial
        for source in declaration.sources:
            source.connect(self.queue.add)

    def enqueue(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.queue.add(key)

    async def _work(self) -> None:
        if self._initial is not None:
            self.enqueue(self._initial())
        await self.runner.run()

    def _stop(self) -> None:
        self.runner.stop()


class SingletonRun(Loop):
    """A `Singleton` on its loop, woken by its gate (or directly by its watches)."""

    def __init__(
        self,
        declaration: Singleton,
        *,
        telemetry: Telemetry,
        backoff: Backoff,
        synced: Synced | None,
    ) -> None:
        super().__init__(declaration.name, synced)
        self._gate = declaration.gate
        self.loop = SingletonLoop(
            declaration.name,
            declaration.reconcile,
            telemetry=telemetry,
            backoff=backoff,
            wake=self._gate.wait if self._gate is not None else None,
            at_start=declaration.at_start,
            requeue_on=declaration.requeue_on,
        )
        for source in declaration.sources:
            source.connect(lambda key: self.enqueue((key,)))

    def enqueue(self, keys: Iterable[str]) -> None:
        if self._gate is not None:
            for key in keys:
                self._gate.trigger(key)
        elif any(True for _ in keys):
            self.loop.poke()

    async def _work(self) -> None:
        await self.loop.run()

    def _stop(self) -> None:
        self.loop.stop()


class Manager:
    """Builds the running loops of declared controllers over the process's informers."""

    def __init__(self, *, telemetry: Telemetry, backoff: Backoff, synced: Synced | None) -> None:
        self._telemetry = telemetry
        self._backoff = backoff
        self._synced = synced

    def loops(
        self, declarations: Sequence[Declaration], informers: Mapping[str, Informer[Any]]
    ) -> list[Loop]:
        """A loop for each declaration whose kinds are all in `informers` (by kind name), its
        watches subscribed to them. A declaration needing a kind this process does not inform
        is left out (tests inform fewer kinds)."""
        loops: list[Loop] = []
        for declaration in declarations:
            missing = sorted({k.kind for k in kinds_of(declaration)} - informers.keys())
            if missing:
                log.debug(
                    "controller not started",
                    extra={"controller": declaration.name, "kinds_not_informed": missing},
                )
                continue
            loop = self.loop(declaration)
            for watch in declaration.watches:
                informers[watch.kind.kind].subscribe(_feed(watch, loop.enqueue))
            loops.append(loop)
        return loops

    def loop(self, declaration: Declaration) -> KeyedLoop | SingletonRun:
        """The running form of one declaration, not yet subscribed to any informer."""
        if isinstance(declaration, Controller):
            return KeyedLoop(
                declaration, telemetry=self._telemetry, backoff=self._backoff, synced=self._synced
            )
        return SingletonRun(
            declaration, telemetry=self._telemetry, backoff=self._backoff, synced=self._synced
        )


def _feed(watch: Watch[Any], enqueue: Callable[[Iterable[str]], None]) -> Subscriber[Any]:
    """An informer subscriber handing the keys `watch` names for each event to `enqueue`."""

    def on_event(event: Event[Any]) -> None:
        enqueue(watch.keys(event))

    return on_event
