"""The coalescing signal between loops (house rule 8).

Loops talk through two things only, both here: a `Trigger` says "something changed" and coalesces
any number of fires into one wake-up, like Karpenter's batcher trigger, and `Keys` carries which
object another loop should reconcile (the manager feeds it into that loop's work queue). Neither
ever blocks its sender, so an informer callback can never stall a watch stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


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


class Keys:
    """A channel of keys from one loop to a keyed controller that declares it as a source.

    `send()` is synchronous and never blocks. Keys sent before the receiving controller is
    connected (by the manager, as the process starts) are kept and delivered on `connect()`, so
    none is lost to start-up order.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._receiver: Callable[[str], None] | None = None
        self._early: list[str] = []

    def send(self, key: str) -> None:
        """Hand `key` to the receiving controller (or keep it until one connects)."""
        if self._receiver is None:
            self._early.append(key)
        else:
            self._receiver(key)

    def connect(self, receiver: Callable[[str], None]) -> None:
        """Deliver every key to `receiver` from now on, starting with those sent before.

        Raises ValueError when the channel already has a receiver: a key goes to one loop.
        """
        if self._receiver is not None:
            msg = f"channel {self.name!r} already has a receiver"
            raise ValueError(msg)
        self._receiver = receiver
        early, self._early = self._early, []
        for key in early:
            receiver(key)
