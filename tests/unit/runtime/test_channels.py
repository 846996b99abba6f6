"""Trigger coalesces; Channel is bounded, ordered, closeable and never blocks `try_send`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from karpy.runtime.channels import Channel, ChannelClosedError, Trigger


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


async def test_channel_is_fifo_and_bounded() -> None:
    channel: Channel[int] = Channel("work", capacity=2)
    assert channel.try_send(1)
    assert channel.try_send(2)
    assert not channel.try_send(3)
    assert len(channel) == 2
    assert await channel.recv() == 1
    assert channel.try_send(3)
    assert [await channel.recv(), await channel.recv()] == [2, 3]


async def test_send_waits_for_room() -> None:
    channel: Channel[str] = Channel("work", capacity=1)
    await channel.send("a")
    async with asyncio.TaskGroup() as group:
        sender = group.create_task(channel.send("b"))
        await asyncio.sleep(0.01)
        assert not sender.done()
        assert await channel.recv() == "a"
    assert await channel.recv() == "b"


async def test_close_drains_then_ends_iteration() -> None:
    channel: Channel[int] = Channel("work", capacity=4)
    for value in (1, 2, 3):
        channel.try_send(value)
    channel.close()
    with pytest.raises(ChannelClosedError, match="work"):
        channel.try_send(4)
    assert [value async for value in channel] == [1, 2, 3]
    with pytest.raises(ChannelClosedError):
        await channel.recv()


async def test_close_wakes_blocked_reader_and_sender() -> None:
    empty: Channel[int] = Channel("empty", capacity=1)
    full: Channel[int] = Channel("full", capacity=1)
    full.try_send(0)
    woken: list[str] = []

    async def expect_closed(name: str, operation: Coroutine[Any, Any, object]) -> None:
        with pytest.raises(ChannelClosedError, match=name):
            await operation
        woken.append(name)

    async with asyncio.TaskGroup() as group:
        group.create_task(expect_closed("empty", empty.recv()))
        group.create_task(expect_closed("full", full.send(1)))
        await asyncio.sleep(0.01)
        assert woken == []
        empty.close()
        full.close()
    assert sorted(woken) == ["empty", "full"]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Channel[int]("bad", capacity=0)
