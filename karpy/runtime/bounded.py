"""Run many independent calls at most a few at a time, and count the ones that failed.

A pass over many objects (tag each registered instance, act on each interruption message) must
not open a connection per object at once, nor let one failure cancel the others: each call
reports its own outcome, and the pass decides afterwards whether it failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence


async def count_failures(
    calls: Sequence[tuple[str, Callable[[], Awaitable[bool]]]], *, limit: int
) -> int:
    """Await every ``(task name, call)`` with at most ``limit`` running at once; return how many
    returned False. A call that raises fails the whole group, as a TaskGroup does."""
    if limit < 1:
        msg = f"count_failures: limit must be >= 1, got {limit}"
        raise ValueError(msg)
    semaphore = asyncio.Semaphore(limit)
    outcomes: list[bool] = []

    async def one(call: Callable[[], Awaitable[bool]]) -> None:
        async with semaphore:
            outcomes.append(await call())

    async with asyncio.TaskGroup() as group:
        for name, call in calls:
            group.create_task(one(call), name=name)
    return outcomes.count(False)
