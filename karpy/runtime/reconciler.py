"""Keyed work queues and the runner that drives every reconciler (house rules 4 and 11).

A controller is declared (`karpy.manager`) around a `reconcile(key) -> Result` function; this
module is the machinery the manager runs it on: keys are deduplicated while they wait, one key is
never reconciled twice at once (serial per key) while different keys run in parallel, errors back
off per key (exponential with jitter, reset on success), `Result(requeue_after=...)` waits, and
every reconcile runs inside a span and with its log fields bound. The semantics follow
client-go's workqueue (dirty and processing sets), which controller-runtime and so Karpenter
build on.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

import attrs
from opentelemetry.trace import Status, StatusCode

from karpy.runtime.backoff import Backoff, KeyedBackoff
from karpy.runtime.logging import bind
from karpy.runtime.telemetry import Telemetry

K = TypeVar("K", bound=Hashable)

log = logging.getLogger(__name__)


@attrs.frozen
class Result:
    """What a reconcile asks for next. Raise instead to back off.

    `requeue_after` (seconds) reconciles the key again after that delay; `requeue` alone re-queues
    it with the per-key backoff, for "not yet, but no error".
    """

    requeue: bool = False
    requeue_after: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            msg = f"Result.requeue_after must be >= 0 seconds, got {self.requeue_after}"
            raise ValueError(msg)


@attrs.frozen
class KeyDescription:
    """How a key appears in spans (`span_attributes`) and in logs (`log_fields`)."""

    span_attributes: Mapping[str, str]
    log_fields: Mapping[str, str]


def describe_plain(key: Hashable) -> KeyDescription:
    """The default description: the key's `str()`."""
    return KeyDescription(span_attributes={"karpy.key": str(key)}, log_fields={"key": str(key)})


class QueueShutDownError(Exception):
    """Raised by `WorkQueue.get()` once the queue is shut down."""


class WorkQueue(Generic[K]):
    """A deduplicating queue of keys with delayed adds; serial per key.

    A key added while it waits is not added twice; a key added while it is being processed runs once
    more after `done()`. Single event loop; all methods but `get` are synchronous and never block.
    """

    def __init__(self, name: str, *, telemetry: Telemetry) -> None:
        self.name = name
        self._metrics = telemetry.metrics
        self._ready: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._sequence = 0
        self._readable = asyncio.Event()
        self._timers_changed = asyncio.Event()
        self._shut_down = False
        # client-go's queue metrics: when each waiting key was added, when each key being
        # processed was handed out (time.monotonic(), which the scrape thread reads too).
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._labels = {"name": name}
        self._metrics.workqueues.add(self)

    def __len__(self) -> int:
        """Keys waiting to run now (not counting delayed keys)."""
        return len(self._ready)

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    def add(self, key: K) -> None:
        """Queue `key` to run as soon as a worker is free (no-op if it is already waiting)."""
        if self._shut_down or key in self._dirty:
            return
        self._due.pop(key, None)
        self._dirty.add(key)
        self._added_at[key] = time.monotonic()
        self._metrics.workqueue_adds_total.add(1, self._labels)
        if key not in self._processing:
            self._ready.append(key)
            self._readable.set()

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds of loop time; an earlier pending time wins."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key)
            return
        due = asyncio.get_running_loop().time() + delay
        if key in self._due and self._due[key] <= due:
            return
        self._due[key] = due
        self._sequence += 1
        heapq.heappush(self._delayed, (due, self._sequence, key))
        self._timers_changed.set()

    async def get(self) -> K:
        """Wait for the next ready key and mark it processing. Call `done(key)` when finished."""
        while not self._ready or self._shut_down:
            if self._shut_down:
                raise QueueShutDownError(self.name)
            self._readable.clear()
            await self._readable.wait()
        key = self._ready.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        now = time.monotonic()
        added = self._added_at.pop(key, None)
        if added is not None:
            self._metrics.workqueue_queue_duration_seconds.record(now - added, self._labels)
        self._started_at[key] = now
        return key

    def depth(self) -> int:
        """Keys waiting to be processed (a key added while it is processed counts once)."""
        return len(self._dirty)

    def processing_since(self) -> Sequence[float]:
        """`time.monotonic()` at which each key being processed now was handed out."""
        return tuple(self._started_at.values())

    def done(self, key: K) -> None:
        """Finish processing `key`; if it was added meanwhile, it becomes ready again."""
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            self._metrics.workqueue_work_duration_seconds.record(
                time.monotonic() - started, self._labels
            )
        if key in self._dirty and not self._shut_down:
            self._ready.append(key)
            self._readable.set()

    def shut_down(self) -> None:
        """Stop handing out keys (waiting ones are dropped); in-flight ones may finish."""
        self._shut_down = True
        self._readable.set()
        self._timers_changed.set()

    async def run_timers(self) -> None:
        """Move delayed keys to ready when due; returns when the queue shuts down."""
        loop = asyncio.get_running_loop()
        while not self._shut_down:
            self._timers_changed.clear()
            now = loop.time()
            while self._delayed and self._delayed[0][0] <= now:
                due, _, key = heapq.heappop(self._delayed)
                if self._due.get(key) == due:
                    del self._due[key]
                    self.add(key)
            timeout = self._delayed[0][0] - now if self._delayed else None
            try:
                async with asyncio.timeout(timeout):
                    await self._timers_changed.wait()
            except TimeoutError:
                continue


Reconcile = Callable[[K], Awaitable[Result]]


class Runner(Generic[K]):
    """Drives `reconcile` over a `WorkQueue` with `workers` parallel workers.

    Exceptions listed in `done_on` (e.g. NotFound) end a key quietly; those in `requeue_on` (e.g. a
    write conflict) re-queue it at once without counting an error; any other exception is an error:
    logged, recorded on the span, and retried after the key's backoff.
    """

    def __init__(
        self,
        name: str,
        reconcile: Reconcile[K],
        *,
        queue: WorkQueue[K],
        telemetry: Telemetry,
        backoff: Backoff,
        workers: int = 1,
        describe: Callable[[K], KeyDescription] = describe_plain,
        done_on: tuple[type[Exception], ...] = (),
        requeue_on: tuple[type[Exception], ...] = (),
    ) -> None:
        if workers < 1:
            msg = f"Runner {name!r}: workers must be >= 1, got {workers}"
            raise ValueError(msg)
        self.name = name
        self.queue = queue
        self._reconcile = reconcile
        self._telemetry = telemetry
        self._backoff: KeyedBackoff[K] = KeyedBackoff(backoff)
        self._workers = workers
        self._describe = describe
        self._done_on = done_on
        self._requeue_on = requeue_on
        self._in_flight = 0
        telemetry.metrics.runners.add(self)

    @property
    def in_flight(self) -> int:
        """Reconciles running right now."""
        return self._in_flight

    async def run(self) -> None:
        """Run workers until the queue shuts down and every in-flight reconcile has finished."""
        self._telemetry.metrics.max_concurrent_reconciles.set(
            self._workers, {"controller": self.name}
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(self.queue.run_timers(), name=f"{self.name}-timers")
            for index in range(self._workers):
                group.create_task(self._worker(), name=f"{self.name}-worker-{index}")

    def stop(self) -> None:
        """Stop taking keys; `run()` returns once in-flight reconciles finish."""
        self.queue.shut_down()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDownError:
                return
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: K) -> None:
        """Reconcile `key` once: span, log fields, metrics, then requeue as the outcome asks."""
        description = self._describe(key)
        metrics = self._telemetry.metrics
        labels = {"controller": self.name}
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._in_flight += 1
        with (
            bind(controller=self.name, **description.log_fields),
            self._telemetry.tracer.start_as_current_span(
                f"reconcile {self.name}",
                attributes={"karpy.controller": self.name, **description.span_attributes},
                record_exception=False,
                set_status_on_exception=False,
            ) as span,
        ):
            try:
                result = await self._reconcile(key)
            except self._done_on:
                self._backoff.success(key)
                span.set_attribute("karpy.result", "done")
                metrics.reconcile_total.add(1, {**labels, "result": "done"})
                return
            except self._requeue_on:
                span.set_attribute("karpy.result", "requeue")
                metrics.reconcile_total.add(1, {**labels, "result": "requeue"})
                self.queue.add(key)
                return
            except Exception as error:
                delay = self._backoff.failure(key)
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                span.set_attribute("karpy.result", "error")
                metrics.reconcile_total.add(1, {**labels, "result": "error"})
                metrics.reconcile_errors_total.add(1, labels)
                metrics.workqueue_retries_total.add(1, {"name": self.queue.name})
                if is_transient(error):
                    # An outage (apiserver or cloud unreachable, throttled, 5xx) is said in one
                    # line with its cause; a stack trace per key per retry would bury the rest.
                    log.error(
                        "reconciler error",
                        extra={"retry_after": round(delay, 3), "error": describe(error)},
                    )
                else:
                    log.exception("reconciler error", extra={"retry_after": round(delay, 3)})
                self.queue.add_after(key, delay)
                return
            finally:
                self._in_flight -= 1
                metrics.reconcile_duration_seconds.record(loop.time() - started, labels)
            if result.requeue_after is not None:
                self._backoff.success(key)
                self.queue.add_after(key, result.requeue_after)
                outcome = "requeue"
            elif result.requeue:
                self.queue.add_after(key, self._backoff.failure(key))
                outcome = "requeue"
            else:
                self._backoff.success(key)
                outcome = "success"
            span.set_attribute("karpy.result", outcome)
            metrics.reconcile_total.add(1, {**labels, "result": outcome})


def is_transient(error: BaseException) -> bool:
    """Whether `error` is one that only waiting cures: a connection refused or reset, a timeout,
    or an error class marked `transient = True` (karpy.kube.errors: unreachable, 429, 5xx);
    for a group, whether every error in it is."""
    if isinstance(error, BaseExceptionGroup):
        return all(is_transient(e) for e in error.exceptions)
    return bool(getattr(error, "transient", False)) or isinstance(
        error, (ConnectionError, TimeoutError)
    )


def describe(error: BaseException) -> str:
    """`error` in one line, with its cause when it has one."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(e) for e in error.exceptions)
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    cause = error.__cause__
    if cause is not None and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {cause})"
    return text


class SingletonLoop:
    """A controller with a single key, whose every reconcile is one pass over everything
    (house rule 4's `reconcile_once()`): how `karpy.manager` runs a declared `Singleton`.

    The pass runs once at start when `at_start`, again each time `wake()` returns (a batch
    closing, a trigger firing), and whenever a pass asks for it (`Result.requeue_after`), with the
    Runner's span, metrics and per-key backoff around each. Passes never overlap: a wake during a
    pass runs one more pass after it.
    """

    def __init__(
        self,
        name: str,
        reconcile_once: Callable[[], Awaitable[Result]],
        *,
        telemetry: Telemetry,
        backoff: Backoff,
        wake: Callable[[], Awaitable[object]] | None = None,
        at_start: bool = True,
        requeue_on: tuple[type[Exception], ...] = (),
    ) -> None:
        self.name = name
        self._queue: WorkQueue[str] = WorkQueue(name, telemetry=telemetry)
        self._runner: Runner[str] = Runner(
            name,
            lambda _key: reconcile_once(),
            queue=self._queue,
            telemetry=telemetry,
            backoff=backoff,
            requeue_on=requeue_on,
        )
        self._wake = wake
        self._at_start = at_start
        self._stopping = asyncio.Event()

    def poke(self) -> None:
        """Ask for a pass (coalesced with any pass already waiting)."""
        self._queue.add(self.name)

    async def run(self) -> None:
        """Run passes until `stop()`; a pass in progress is finished first."""
        if self._at_start:
            self.poke()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._runner.run(), name=f"{self.name}-runner")
            if self._wake is not None:
                pump = group.create_task(self._pump(self._wake), name=f"{self.name}-wake")
                await self._stopping.wait()
                pump.cancel()

    def stop(self) -> None:
        self._stopping.set()
        self._runner.stop()

    async def _pump(self, wake: Callable[[], Awaitable[object]]) -> None:
        while True:
            await wake()
            self.poke()
