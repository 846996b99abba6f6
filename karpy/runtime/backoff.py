"""One backoff vocabulary for every retry in karpy (house rule 11).

Reconcile errors, watch reconnects and lease retries all back off exponentially with jitter, per
key, and reset on success. Keeping the arithmetic here, with the policy as a value in `Options`,
means every retry delay in the process can be explained from one place.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Hashable
from typing import Generic, TypeVar

import attrs

K = TypeVar("K", bound=Hashable)


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        msg = f"Backoff.{attribute.name} must be > 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen
class Backoff:
    """Exponential backoff policy: `base * factor**attempt`, capped, with proportional jitter.

    `jitter` is the fraction of the delay that is randomised (0.1 = +/-10%), so that replicas and
    keys that failed together do not retry in lockstep.
    """

    base: float = attrs.field(default=1.0, validator=_positive)
    cap: float = attrs.field(default=300.0, validator=_positive)
    factor: float = attrs.field(default=2.0, validator=_positive)
    jitter: float = attrs.field(default=0.1)

    def __attrs_post_init__(self) -> None:
        if self.cap < self.base:
            msg = f"Backoff.cap ({self.cap}) must be >= Backoff.base ({self.base})"
            raise ValueError(msg)
        if not 0 <= self.jitter < 1:
            msg = f"Backoff.jitter must be in [0, 1), got {self.jitter!r}"
            raise ValueError(msg)

    def delay(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based). Never above `cap`."""
        if attempt < 0:
            msg = f"Backoff.delay: attempt must be >= 0, got {attempt}"
            raise ValueError(msg)
        # Cap the exponent first so huge attempt counts cannot overflow a float.
        raw = self.base * self.factor ** min(attempt, 64) if self.factor > 1 else self.base
        raw = min(raw, self.cap)
        if self.jitter == 0:
            return raw
        source = rng if rng is not None else _RNG
        spread = raw * self.jitter
        return min(self.cap, max(0.0, raw + source.uniform(-spread, spread)))


# Jitter only de-synchronises retries; it is not security-relevant.
_RNG = random.Random()  # noqa: S311


@attrs.define
class KeyedBackoff(Generic[K]):
    """Failure counts per key, turned into delays by one `Backoff` policy.

    Side effects: `failure()` counts a failure for the key; `success()` forgets the key.
    """

    policy: Backoff
    rng: random.Random | None = None
    _failures: dict[K, int] = attrs.field(factory=dict, init=False)

    def failure(self, key: K) -> float:
        """Record a failure of `key` and return how long to wait before retrying it."""
        attempt = self._failures.get(key, 0)
        self._failures[key] = attempt + 1
        return self.policy.delay(attempt, rng=self.rng)

    def success(self, key: K) -> None:
        """Reset `key` after a success, so its next failure starts from `base` again."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """Consecutive failures recorded for `key`."""
        return self._failures.get(key, 0)


async def sleep(delay: float, *, wakeup: asyncio.Event | None = None) -> float:
    """Sleep for `delay` seconds of loop time, or until `wakeup` is set.

    Returns the time left unslept (0.0 when the full delay elapsed), so callers can tell an
    interrupted sleep from a finished one. Cancellation propagates as usual.
    """
    if delay <= 0:
        return 0.0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay
    if wakeup is None:
        await asyncio.sleep(delay)
        return 0.0
    try:
        async with asyncio.timeout(delay):
            await wakeup.wait()
    except TimeoutError:
        return 0.0
    return max(0.0, deadline - loop.time())
