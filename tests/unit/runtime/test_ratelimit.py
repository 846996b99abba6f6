"""The token bucket lets a burst through, then paces callers at the configured rate, in order."""

from __future__ import annotations

import pytest

from karpy.runtime.options import load
from karpy.runtime.ratelimit import TokenBucket


class FakeTime:
    """A clock that moves only when the bucket sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_burst_then_rate() -> None:
    fake = FakeTime()
    bucket = TokenBucket(rate=50.0, burst=3, now=fake.time, sleep=fake.sleep)
    waits = [await bucket.acquire() for _ in range(8)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    # Each token beyond the burst costs 1/50 s: five of them, 0.1 s in all.
    assert waits[3:] == pytest.approx([0.02] * 5)
    assert fake.now == pytest.approx(0.1)


async def test_concurrent_callers_reserve_in_turn() -> None:
    fake = FakeTime()
    bucket = TokenBucket(rate=100.0, burst=1, now=fake.time, sleep=fake.sleep)
    # Five callers arrive at once: the first takes the saved token, the rest queue behind
    # each other's reservations, 10 ms apart.
    waits = []
    for _ in range(5):
        fake.now = 0.0  # all arrive at the same instant
        waits.append(await bucket.acquire())
    assert waits == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])


async def test_tokens_refill_while_idle() -> None:
    fake = FakeTime()
    bucket = TokenBucket(rate=100.0, burst=2, now=fake.time, sleep=fake.sleep)
    await bucket.acquire()
    await bucket.acquire()
    fake.now += 0.03
    assert await bucket.acquire() == 0.0
    assert fake.slept == []


async def test_the_loop_clock_is_the_default() -> None:
    bucket = TokenBucket(rate=1000.0, burst=1)
    assert await bucket.acquire() == 0.0
    assert await bucket.acquire() >= 0.0


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
