"""The keyed work queue and runner: dedupe, serial per key, parallel across keys, backoff, spans."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from karpy.runtime.backoff import Backoff
from karpy.runtime.reconciler import KeyDescription, Result, Runner, SingletonLoop, WorkQueue
from karpy.runtime.telemetry import Telemetry
from tests.support.waiting import eventually

FAST = Backoff(base=0.01, cap=0.05, jitter=0.0)


def make_runner(
    telemetry: Telemetry,
    reconcile: Callable[[str], Awaitable[Result]],
    *,
    workers: int = 4,
    **kwargs: object,
) -> Runner[str]:
    queue: WorkQueue[str] = WorkQueue("test", telemetry=telemetry)
    return Runner(
        "test.controller",
        reconcile,
        queue=queue,
        telemetry=telemetry,
        backoff=FAST,
        workers=workers,
        **kwargs,  # type: ignore[arg-type]
    )


async def run_until(runner: Runner[str], done: asyncio.Event) -> None:
    async with asyncio.TaskGroup() as group:
        task = group.create_task(runner.run())
        async with asyncio.timeout(5.0):
            await done.wait()
        runner.stop()
    assert task.done()


async def test_queue_deduplicates_waiting_keys(telemetry: Telemetry) -> None:
    queue: WorkQueue[str] = WorkQueue("q", telemetry=telemetry)
    for key in ["a", "b", "a", "a"]:
        queue.add(key)
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_key_added_while_processing_runs_again_after_done(telemetry: Telemetry) -> None:
    queue: WorkQueue[str] = WorkQueue("q", telemetry=telemetry)
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    assert len(queue) == 0  # not handed out twice at once
    queue.done(key)
    assert await queue.get() == "a"


async def test_serial_per_key_parallel_across_keys(telemetry: Telemetry) -> None:
    running: Counter[str] = Counter()
    max_same_key = 0
    max_parallel = 0
    calls: Counter[str] = Counter()
    done = asyncio.Event()
    queue_ref: list[WorkQueue[str]] = []

    async def reconcile(key: str) -> Result:
        nonlocal max_same_key, max_parallel
        running[key] += 1
        max_same_key = max(max_same_key, running[key])
        max_parallel = max(max_parallel, sum(running.values()))
        if calls[key] == 0:
            queue_ref[0].add(key)  # re-added while running: must wait for this one to finish
        await asyncio.sleep(0.02)
        calls[key] += 1
        running[key] -= 1
        if sum(calls.values()) == 6:
            done.set()
        return Result()

    runner = make_runner(telemetry, reconcile, workers=4)
    queue_ref.append(runner.queue)
    for key in ["a", "b", "c"]:
        runner.queue.add(key)
    await run_until(runner, done)
    assert calls == {"a": 2, "b": 2, "c": 2}
    assert max_same_key == 1
    assert max_parallel >= 2


async def test_errors_back_off_per_key_and_reset_on_success(telemetry: Telemetry) -> None:
    attempts: list[float] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def reconcile(key: str) -> Result:
        attempts.append(loop.time())
        if len(attempts) < 4:
            raise RuntimeError("boom")
        done.set()
        return Result()

    runner = make_runner(telemetry, reconcile)
    runner.queue.add("a")
    with pytest.raises(TimeoutError):  # the errors are logged, not raised
        async with asyncio.timeout(0):
            await done.wait()
    await run_until(runner, done)
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    # 0.01, 0.02, 0.04 s: exponential, per key.
    assert gaps[0] >= 0.009
    assert gaps[1] >= 0.019
    assert gaps[2] >= 0.039
    assert runner._backoff.failures("a") == 0


async def test_requeue_after_waits_then_runs_again(telemetry: Telemetry) -> None:
    times: list[float] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def reconcile(key: str) -> Result:
        times.append(loop.time())
        if len(times) == 2:
            done.set()
            return Result()
        return Result(requeue_after=0.05)

    runner = make_runner(telemetry, reconcile)
    runner.queue.add("a")
    await run_until(runner, done)
    assert times[1] - times[0] >= 0.049


async def test_done_on_and_requeue_on(telemetry: Telemetry) -> None:
    class GoneError(Exception):
        pass

    class ConflictError(Exception):
        pass

    calls: Counter[str] = Counter()
    done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        calls[key] += 1
        if key == "gone":
            raise GoneError
        if calls[key] == 1:
            raise ConflictError
        done.set()
        return Result()

    runner = make_runner(telemetry, reconcile, done_on=(GoneError,), requeue_on=(ConflictError,))
    runner.queue.add("gone")
    runner.queue.add("conflict")
    await run_until(runner, done)
    assert calls == {"gone": 1, "conflict": 2}


async def test_every_reconcile_has_a_span_with_the_key_identity(
    telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        if key == "bad":
            raise ValueError("bad input")
        done.set()
        return Result()

    def describe(key: str) -> KeyDescription:
        return KeyDescription(span_attributes={"k8s.object.name": key}, log_fields={"pod": key})

    runner = make_runner(telemetry, reconcile, workers=1, describe=describe)
    runner.queue.add("bad")
    runner.queue.add("good")
    await run_until(runner, done)
    finished = {
        str((span.attributes or {})["k8s.object.name"]): span for span in spans.get_finished_spans()
    }
    assert finished["good"].name == "reconcile test.controller"
    assert (finished["good"].attributes or {})["karpy.result"] == "success"
    assert finished["bad"].status.status_code is StatusCode.ERROR
    assert finished["bad"].events[0].name == "exception"


async def test_stop_lets_in_flight_reconcile_finish(telemetry: Telemetry) -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: str) -> Result:
        started.set()
        await asyncio.sleep(0.05)
        finished.append(key)
        return Result()

    runner = make_runner(telemetry, reconcile, workers=1)
    runner.queue.add("a")
    runner.queue.add("b")
    async with asyncio.TaskGroup() as group:
        group.create_task(runner.run())
        await started.wait()
        runner.stop()
    assert finished == ["a"]  # in-flight "a" finished; waiting "b" was not started
    assert runner.in_flight == 0


def test_result_rejects_negative_delay() -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=-1)


async def test_a_singleton_loop_runs_at_start_on_wake_and_when_a_pass_asks(
    telemetry: Telemetry,
) -> None:
    wakes: asyncio.Queue[None] = asyncio.Queue()
    ran: asyncio.Queue[int] = asyncio.Queue()
    passes = 0

    async def reconcile_once() -> Result:
        nonlocal passes
        passes += 1
        ran.put_nowait(passes)
        # The first pass asks for another soon; the others wait for a wake.
        return Result(requeue_after=0.01) if passes == 1 else Result()

    loop = SingletonLoop(
        "singleton",
        reconcile_once,
        telemetry=telemetry,
        backoff=Backoff(base=0.01, cap=0.01),
        wake=wakes.get,
    )
    async with asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        async with asyncio.timeout(5):
            assert await ran.get() == 1  # at start
            assert await ran.get() == 2  # asked for by the first pass
            wakes.put_nowait(None)
            assert await ran.get() == 3  # woken
        loop.stop()
    assert passes == 3


async def test_a_singleton_loop_without_at_start_waits_for_its_first_wake(
    telemetry: Telemetry,
) -> None:
    wakes: asyncio.Queue[None] = asyncio.Queue()
    ran: asyncio.Queue[None] = asyncio.Queue()

    async def reconcile_once() -> Result:
        ran.put_nowait(None)
        return Result()

    loop = SingletonLoop(
        "waits",
        reconcile_once,
        telemetry=telemetry,
        backoff=Backoff(base=0.01, cap=0.01),
        wake=wakes.get,
        at_start=False,
    )
    async with asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await ran.get()
        wakes.put_nowait(None)
        async with asyncio.timeout(5):
            await ran.get()
        loop.stop()
    assert ran.empty()


async def test_the_queue_reports_client_go_work_queue_metrics(telemetry: Telemetry) -> None:
    """Adds, time waiting and time processing per key, and the work in progress, read at
    scrape time: client-go's work-queue metrics, by queue name."""
    queue: WorkQueue[str] = WorkQueue("measured", telemetry=telemetry)
    for key in ["a", "b", "a"]:
        queue.add(key)
    assert await queue.get() == "a"
    await asyncio.sleep(0.05)
    text = telemetry.prometheus_text()
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("workqueue_") and 'name="measured"' in line
    }
    assert samples['workqueue_adds_total{name="measured"}'] == 2  # "a" twice while waiting
    assert samples['workqueue_queue_duration_seconds_count{name="measured"}'] == 1
    assert samples['workqueue_unfinished_work_seconds{name="measured"}'] >= 0.05
    assert samples['workqueue_longest_running_processor_seconds{name="measured"}'] >= 0.05
    assert 'workqueue_work_duration_seconds_count{name="measured"}' not in samples
    queue.done("a")
    after = telemetry.prometheus_text()
    assert 'workqueue_work_duration_seconds_count{name="measured"} 1.0' in after
    assert 'workqueue_longest_running_processor_seconds{name="measured"} 0.0' in after


async def test_active_workers_count_reconciles_in_flight(telemetry: Telemetry) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def reconcile(key: str) -> Result:
        entered.set()
        await release.wait()
        return Result()

    runner = make_runner(telemetry, reconcile, workers=2)
    gauge = 'controller_runtime_active_workers{controller="test.controller"}'
    async with asyncio.TaskGroup() as group:
        group.create_task(runner.run())
        runner.queue.add("a")
        async with asyncio.timeout(5.0):
            await entered.wait()
        text = telemetry.prometheus_text()
        assert f"{gauge} 1.0" in text
        assert (
            'controller_runtime_max_concurrent_reconciles{controller="test.controller"} 2.0' in text
        )
        release.set()

        async def idle() -> bool:
            return f"{gauge} 0.0" in telemetry.prometheus_text()

        await eventually(idle, within=5.0, interval=0.01, what="the worker to finish")
        runner.stop()
