"""Trigger coalesces fires into one wake-up and wakes a waiting reader."""

from __future__ import annotations

import asyncio

import pytest

from karpy.runtime.channels import Trigger


async def test_trigger_coalesces_fires_into_one_wakeup() -> None:
    trigger = Trigger("pods")
    for _ in range(5):
        trigger.fire()
    pending_before = trigger.pending
    assert await trigger.wait() == 5
    pending_after = trigger.pending
    assert (pending_before, pending_after) == (True, False)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.02):
            await trigger.wait()


async def test_trigger_wakes_a_waiting_reader() -> None:
    trigger = Trigger("pods")
    async with asyncio.TaskGroup() as group:
        waiter = group.create_task(trigger.wait())
        await asyncio.sleep(0)
        trigger.fire()
    assert waiter.result() == 1
