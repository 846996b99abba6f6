"""The token bucket lets a burst through, then paces callers at the configured rate, in order."""

from __future__ import annotations

import asyncio

import pytest

from karpy.runtime.options import load
from karpy.runtime.ratelimit import TokenBucket


async def test_burst_then_rate() -> None:
    bucket = TokenBucket(rate=50.0, burst=3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    waits = [await bucket.acquire() for _ in range(8)]
    elapsed = loop.time() - started
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert all(wait > 0 for wait in waits[3:])
    # Five tokens beyond the burst at 50/s need at least 0.1 s.
    assert elapsed >= 0.099


async def test_concurrent_callers_are_paced_not_bunched() -> None:
    bucket = TokenBucket(rate=100.0, burst=1)
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def call() -> None:
        await bucket.acquire()
        times.append(loop.time())

    async with asyncio.TaskGroup() as group:
        for _ in range(5):
            group.create_task(call())
    assert times == sorted(times)
    assert times[-1] - times[0] >= 0.039


async def test_tokens_refill_while_idle() -> None:
    bucket = TokenBucket(rate=100.0, burst=2)
    await bucket.acquire()
    await bucket.acquire()
    await asyncio.sleep(0.03)
    assert await bucket.acquire() == 0.0


@pytest.mark.parametrize(
    ("rate", "burst"), [pytest.param(0, 1, id="rate"), pytest.param(1, 0, id="burst")]
)
def test_rejects_bad_settings(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="TokenBucket"):
        TokenBucket(rate=rate, burst=burst)


def test_options_use_karpenter_names_and_defaults() -> None:
    assert (load([], {}).kube.qps, load([], {}).kube.burst) == (200.0, 300)
    options = load(["--kube-client-burst", "10"], {"KUBE_CLIENT_QPS": "5.5"})
    assert (options.kube.qps, options.kube.burst) == (5.5, 10)
