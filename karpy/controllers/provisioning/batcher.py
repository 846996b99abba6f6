"""The provisioning batch window: gather a burst of pending pods before solving once.

Pods arrive in bursts (a Deployment scaled to 100 creates 100 pods within a second or two).
Solving for each pod alone would launch a node per pod; solving for the burst packs them. So,
as Karpenter's batcher does, the window opens on the first trigger and closes once no trigger has
come for `idle_duration`, or `max_duration` after it opened so a steady trickle still gets
scheduled. `trigger(uid)` is synchronous and never blocks, so an informer callback may call it:
it records the UID and fires the coalescing `Trigger` (house rule 8) the single reader waits on;
`wait()` returns the pod UIDs of the batch. Durations run on the event loop's clock (house rule
9).
"""

from __future__ import annotations

import asyncio
import enum
import logging

import attrs

from karpy.runtime.channels import Trigger
from karpy.runtime.options import BatchingOptions

log = logging.getLogger(__name__)


class ClosedBy(enum.StrEnum):
    """Why a batch window closed."""

    IDLE = "idle"
    MAX_DURATION = "max-duration"


@attrs.frozen
class Batch:
    """One closed window: the UIDs triggered in it (first-trigger order, no duplicates)."""

    uids: tuple[str, ...]
    triggers: int
    closed_by: ClosedBy
    seconds: float


class Batcher:
    """Karpenter's batcher on the event loop: non-blocking `trigger`, one reader of `wait`."""

    def __init__(self, options: BatchingOptions, *, signal: Trigger) -> None:
        if options.idle_duration <= 0 or options.max_duration <= 0:
            msg = (
                f"Batcher: idle ({options.idle_duration}s) and max ({options.max_duration}s)"
                " durations must be positive"
            )
            raise ValueError(msg)
        self._idle = options.idle_duration
        self._max = options.max_duration
        self._uids: dict[str, None] = {}  # an insertion-ordered set
        self._triggers = 0
        self._signal = signal

    def trigger(self, uid: str) -> None:
        """Add `uid` to the open window (or open one). Synchronous; never blocks."""
        self._uids.setdefault(uid, None)
        self._triggers += 1
        self._signal.fire()

    @property
    def pending(self) -> int:
        """UIDs triggered since the last batch was taken."""
        return len(self._uids)

    async def wait(self) -> Batch:
        """Wait for the first trigger, then until the window closes; return the batch."""
        # A fire already counted into the previous batch may still be pending: wait on until
        # there is something to batch.
        while not self._uids:
            await self._signal.wait()
        loop = asyncio.get_running_loop()
        opened = loop.time()
        deadline = opened + self._max
        closed_by = ClosedBy.MAX_DURATION
        while (remaining := deadline - loop.time()) > 0:
            idle = self._idle < remaining
            try:
                async with asyncio.timeout(min(self._idle, remaining)):
                    await self._signal.wait()
            except TimeoutError:
                closed_by = ClosedBy.IDLE if idle else ClosedBy.MAX_DURATION
                break
        # No await between the last wake-up and taking the batch: a trigger either lands in
        # this batch or opens the next window.
        batch = Batch(
            uids=tuple(self._uids),
            triggers=self._triggers,
            closed_by=closed_by,
            seconds=loop.time() - opened,
        )
        self._uids = {}
        self._triggers = 0
        log.debug(
            "batch closed", extra={"pods": len(batch.uids), "closed_by": batch.closed_by.value}
        )
        return batch
