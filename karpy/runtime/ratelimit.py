"""A token bucket for client-side API rate limiting (Karpenter's KUBE_CLIENT_QPS and _BURST).

A controller that lists or patches in a tight loop must not flood the apiserver; client-go puts a
token bucket in front of every request, and karpy's kube client does the same. Waiters reserve a
token and sleep for exactly their deficit on the loop clock, so they are served in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved; `acquire()` takes one, waiting if needed."""

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        now: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``now`` (seconds, monotonic; the running loop's clock by default) and ``sleep`` are
        injectable, so the pacing can be proven without timing anything."""
        if rate <= 0:
            msg = f"TokenBucket: rate must be > 0 per second, got {rate}"
            raise ValueError(msg)
        if burst < 1:
            msg = f"TokenBucket: burst must be >= 1, got {burst}"
            raise ValueError(msg)
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._updated: float | None = None
        self._now = now
        self._sleep = sleep

    async def acquire(self) -> float:
        """Take one token; returns the seconds waited (0.0 when one was available)."""
        now = self._now() if self._now is not None else asyncio.get_running_loop().time()
        if self._updated is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now
        self._tokens -= 1
        if self._tokens >= 0:
            return 0.0
        # A reservation: the deficit is paid by waiting, and later callers queue behind it.
        wait = -self._tokens / self.rate
        await self._sleep(wait)
        return wait
