"""Typed, bounded hand-offs between loops (house rule 8).

Loops talk through two things only. A `Trigger` says "something changed" and coalesces any number of
fires into one wake-up, like Karpenter's batcher trigger; firing never blocks. A `Channel[T]`
carries values: it is bounded (so a slow reader applies back-pressure instead of growing memory),
has one reader, and an owner that closes it. Producers inside a reconcile use the non-blocking
`try_send` so they never stall.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ChannelClosedError(Exception):
    """Raised when sending to, or receiving from an empty, closed channel."""

    def __init__(self, name: str) -> None:
        super().__init__(f"channel {name!r} is closed")
        self.name = name


class Trigger:
    """A coalescing signal: many `fire()`s before a `wait()` wake the reader once.

    Single reader. `fire()` is synchronous and never blocks, so any callback may call it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = asyncio.Event()
        self._fired = 0

    def fire(self) -> None:
        """Signal the reader; idempotent until the reader consumes it."""
        self._fired += 1
        self._event.set()

    @property
    def pending(self) -> bool:
        """True when a fire has not been consumed yet."""
        return self._event.is_set()

    async def wait(self) -> int:
        """Wait for a fire, consume it, and return how many fires it coalesced."""
        await self._event.wait()
        self._event.clear()
        fired, self._fired = self._fired, 0
        return fired


class Channel(Generic[T]):
    """A bounded, closeable FIFO with one reader and one owner.

    `try_send` never blocks (it returns False when full); `send` waits for room. After `close()`,
    sends raise `ChannelClosedError` and the reader drains what is left, then iteration ends.
    """

    def __init__(self, name: str, *, capacity: int) -> None:
        if capacity < 1:
            msg = f"Channel {name!r}: capacity must be >= 1, got {capacity}"
            raise ValueError(msg)
        self.name = name
        self.capacity = capacity
        self._items: deque[T] = deque()
        self._closed = False
        # Level-triggered flags kept in step with `_items` by `_update()`; waiters re-check.
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        return self._closed

    def try_send(self, item: T) -> bool:
        """Enqueue `item` without waiting; False (nothing enqueued) when the channel is full."""
        if self._closed:
            raise ChannelClosedError(self.name)
        if len(self._items) >= self.capacity:
            return False
        self._items.append(item)
        self._update()
        return True

    async def send(self, item: T) -> None:
        """Enqueue `item`, waiting while the channel is full."""
        while not self.try_send(item):
            await self._writable.wait()

    async def recv(self) -> T:
        """Take the oldest item, waiting while empty; raise `ChannelClosedError` once drained."""
        while not self._items:
            if self._closed:
                raise ChannelClosedError(self.name)
            await self._readable.wait()
        item = self._items.popleft()
        self._update()
        return item

    def close(self) -> None:
        """Refuse further sends and let the reader finish. Idempotent; only the owner calls it."""
        self._closed = True
        # Wake everyone so blocked senders raise and the reader sees the end.
        self._readable.set()
        self._writable.set()

    def _update(self) -> None:
        if self._items or self._closed:
            self._readable.set()
        else:
            self._readable.clear()
        if len(self._items) < self.capacity or self._closed:
            self._writable.set()
        else:
            self._writable.clear()

    async def __aiter__(self) -> AsyncIterator[T]:
        while True:
            try:
                yield await self.recv()
            except ChannelClosedError:
                return
