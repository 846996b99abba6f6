"""Backoff arithmetic, keyed failure counts, interruptible sleep and the fake clock."""

from __future__ import annotations

import asyncio
import datetime
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime.backoff import Backoff, KeyedBackoff, sleep
from karpy.runtime.clock import FakeClock, SystemClock


def test_backoff_doubles_then_caps_without_jitter() -> None:
    policy = Backoff(base=1.0, cap=10.0, jitter=0.0)
    assert [policy.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@given(
    attempt=st.integers(min_value=0, max_value=10_000),
    base=st.floats(min_value=0.001, max_value=10),
    jitter=st.floats(min_value=0, max_value=0.9),
    seed=st.integers(),
)
def test_backoff_stays_within_bounds(attempt: int, base: float, jitter: float, seed: int) -> None:
    policy = Backoff(base=base, cap=base * 100, jitter=jitter)
    delay = policy.delay(attempt, rng=random.Random(seed))  # noqa: S311 -- seeded, not crypto
    assert 0 <= delay <= policy.cap


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"base": 0}, id="zero-base"),
        pytest.param({"base": 5, "cap": 1}, id="cap-below-base"),
        pytest.param({"jitter": 1.0}, id="jitter-one"),
    ],
)
def test_backoff_rejects_bad_policy(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(**kwargs)


def test_keyed_backoff_counts_per_key_and_resets_on_success() -> None:
    keyed: KeyedBackoff[str] = KeyedBackoff(Backoff(base=1, cap=100, jitter=0))
    assert keyed.failure("a") == 1
    assert keyed.failure("a") == 2
    assert keyed.failure("b") == 1
    assert keyed.failures("a") == 2
    keyed.success("a")
    assert keyed.failures("a") == 0
    assert keyed.failure("a") == 1


async def test_sleep_returns_time_left_when_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop's clock moves only when the test says, so the time left is exact, not timed.
    loop = asyncio.get_running_loop()
    now = [1000.0]
    monkeypatch.setattr(loop, "time", lambda: now[0])
    wakeup = asyncio.Event()

    def wake() -> None:
        now[0] += 1.5
        wakeup.set()

    loop.call_soon(wake)
    left = await sleep(5.0, wakeup=wakeup)
    assert left == 3.5


async def test_sleep_returns_zero_when_it_elapses() -> None:
    assert await sleep(0.01, wakeup=asyncio.Event()) == 0.0
    assert await sleep(0.0) == 0.0


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock()
    start = clock.now()
    assert clock.now() == start
    later = clock.step(datetime.timedelta(seconds=30))
    assert later - start == datetime.timedelta(seconds=30)
    with pytest.raises(ValueError, match="negative"):
        clock.step(datetime.timedelta(seconds=-1))
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime.datetime(2026, 1, 1))  # noqa: DTZ001 -- the naive value under test


def test_system_clock_is_utc_aware() -> None:
    assert SystemClock().now().tzinfo is datetime.UTC
