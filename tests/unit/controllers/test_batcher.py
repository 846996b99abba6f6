"""The provisioning batcher: one window per burst, capped, and no trigger is ever lost.

No assertion depends on how long something took: each test checks grouping and order, and
bounds its waits generously so a loaded machine slows it down without failing it.
"""

from __future__ import annotations

import asyncio

import pytest

from karpy.controllers.provisioning.batcher import Batcher, ClosedBy
from karpy.runtime.channels import Trigger
from karpy.runtime.options import BatchingOptions

BOUND = 10.0  # seconds; only a hang reaches it


async def test_a_burst_is_one_batch_in_first_trigger_order_without_duplicates() -> None:
    batcher = Batcher(
        BatchingOptions(idle_duration=0.05, max_duration=BOUND), signal=Trigger("provisioning")
    )
    for uid in ("a", "b", "a", "c"):
        batcher.trigger(uid)
        await asyncio.sleep(0)
    async with asyncio.timeout(BOUND):
        batch = await batcher.wait()
    assert batch.uids == ("a", "b", "c")
    assert batch.triggers == 4
    assert batch.closed_by is ClosedBy.IDLE
    assert batcher.pending == 0


async def test_the_window_opens_only_on_the_first_trigger() -> None:
    batcher = Batcher(
        BatchingOptions(idle_duration=0.01, max_duration=0.01), signal=Trigger("provisioning")
    )
    async with asyncio.TaskGroup() as tg:
        waiting = tg.create_task(batcher.wait())
        await asyncio.sleep(0.05)  # several idle and max durations with no trigger
        assert not waiting.done()
        batcher.trigger("a")
    assert waiting.result().uids == ("a",)


async def test_triggers_inside_the_idle_window_keep_it_open() -> None:
    batcher = Batcher(
        BatchingOptions(idle_duration=0.5, max_duration=BOUND), signal=Trigger("provisioning")
    )
    batcher.trigger("a")
    async with asyncio.TaskGroup() as tg:
        waiting = tg.create_task(batcher.wait())
        for uid in ("b", "c"):
            await asyncio.sleep(0.01)  # far inside the idle window
            batcher.trigger(uid)
    assert waiting.result().uids == ("a", "b", "c")
    assert waiting.result().closed_by is ClosedBy.IDLE


async def test_a_steady_trickle_is_cut_at_the_max_duration() -> None:
    batcher = Batcher(
        BatchingOptions(idle_duration=BOUND, max_duration=0.05), signal=Trigger("provisioning")
    )
    stop = asyncio.Event()

    async def trickle() -> None:
        i = 0
        while not stop.is_set():
            batcher.trigger(f"p{i}")
            i += 1
            await asyncio.sleep(0.005)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(trickle())
        async with asyncio.timeout(BOUND):
            first = await batcher.wait()
            second = await batcher.wait()
        stop.set()
    assert first.closed_by is ClosedBy.MAX_DURATION
    assert second.closed_by is ClosedBy.MAX_DURATION
    assert first.uids[0] == "p0"
    # Nothing is lost or repeated between consecutive windows.
    numbers = [int(u[1:]) for u in (*first.uids, *second.uids)]
    assert numbers == list(range(len(numbers)))


async def test_a_trigger_after_a_batch_opens_the_next_one() -> None:
    batcher = Batcher(
        BatchingOptions(idle_duration=0.01, max_duration=BOUND), signal=Trigger("provisioning")
    )
    batcher.trigger("a")
    async with asyncio.timeout(BOUND):
        first = await batcher.wait()
        batcher.trigger("b")
        second = await batcher.wait()
    assert (first.uids, second.uids) == (("a",), ("b",))


def test_triggers_never_block_without_a_reader() -> None:
    batcher = Batcher(BatchingOptions(), signal=Trigger("provisioning"))
    for i in range(10_000):
        batcher.trigger(f"p{i % 100}")
    assert batcher.pending == 100


@pytest.mark.parametrize(("idle", "most"), [(0.0, 1.0), (1.0, -1.0)])
def test_durations_must_be_positive(idle: float, most: float) -> None:
    with pytest.raises(ValueError, match="durations must be positive"):
        Batcher(
            BatchingOptions(idle_duration=idle, max_duration=most), signal=Trigger("provisioning")
        )


async def test_a_stale_fire_never_yields_an_empty_batch() -> None:
    signal = Trigger("provisioning")
    batcher = Batcher(BatchingOptions(idle_duration=0.01, max_duration=BOUND), signal=signal)
    signal.fire()  # as if a trigger landed in the previous batch after its last wake-up
    async with asyncio.TaskGroup() as tg:
        waiting = tg.create_task(batcher.wait())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        batcher.trigger("b")
    assert waiting.result().uids == ("b",)
