"""count_failures: a bounded number of calls at once, every call awaited, failures counted."""

from __future__ import annotations

import asyncio

import pytest

from karpy.runtime.bounded import count_failures


async def test_calls_run_at_most_limit_at_once_and_failures_are_counted() -> None:
    running = peak = 0

    async def call(ok: bool) -> bool:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return ok

    outcomes = [True, False, True, False, False, True, True]
    calls = [(f"call-{i}", lambda ok=ok: call(ok)) for i, ok in enumerate(outcomes)]
    assert await count_failures(calls, limit=3) == 3
    assert peak == 3
    assert await count_failures([], limit=1) == 0


async def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit must be >= 1, got 0"):
        await count_failures([], limit=0)
