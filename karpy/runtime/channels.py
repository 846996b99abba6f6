"""The coalescing signal between loops (house rule 8).

Loops talk through two things only: a `Trigger`, here, says "something changed" and coalesces any
number of fires into one wake-up, like Karpenter's batcher trigger, and a keyed
`karpy.runtime.reconciler.WorkQueue` carries which object to reconcile. Firing never blocks, so an
informer callback can never stall a watch stream.
"""

from __future__ import annotations

import asyncio


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
