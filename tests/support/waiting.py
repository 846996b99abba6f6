"""Waiting on a real cluster without sleeping blindly: poll a probe until it holds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    within: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Await ``probe()`` until it returns something truthy, and return that.

    Fails naming ``what`` was awaited, with the probe's last value, when ``within`` seconds
    pass first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: T | None = None
    while loop.time() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not met within {within}s; last value: {last!r}")
