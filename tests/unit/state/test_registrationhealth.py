"""The window of registration outcomes behind NodeRegistrationHealthy (Karpenter's: the last
four, unhealthy at two failures), as a property and at its edges."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.state.registrationhealth import (
    WINDOW,
    Health,
    RegistrationHealth,
    health_of,
)


@pytest.mark.parametrize(
    ("outcomes", "health"),
    [
        pytest.param((), Health.UNKNOWN, id="nothing-yet"),
        pytest.param((False,), Health.HEALTHY, id="one-failure-is-no-verdict"),
        pytest.param((False, False), Health.UNHEALTHY, id="two-failures"),
        pytest.param((False, True, False), Health.UNHEALTHY, id="two-of-three"),
        pytest.param((False, False, True, True, True), Health.HEALTHY, id="old-failures-age-out"),
        pytest.param((True, True, False, False), Health.UNHEALTHY, id="half-of-four"),
    ],
)
def test_health_of(outcomes: tuple[bool, ...], health: Health) -> None:
    assert health_of(outcomes) is health


@given(st.lists(st.booleans(), max_size=12))
def test_the_window_remembers_only_the_last_outcomes(outcomes: list[bool]) -> None:
    window = RegistrationHealth()
    for ok in outcomes:
        window.record("pool", ok)
    kept = window.outcomes("pool")
    assert kept == tuple(outcomes[-WINDOW:])
    failures = sum(1 for ok in kept if not ok)
    expected = (
        Health.UNKNOWN
        if not kept
        else (Health.UNHEALTHY if 2 * failures >= WINDOW else Health.HEALTHY)
    )
    assert health_of(kept) is expected


def test_health_after_records_nothing() -> None:
    window = RegistrationHealth()
    window.record("pool", False)
    assert window.health_after("pool", False) is Health.UNHEALTHY
    assert window.outcomes("pool") == (False,)


def test_reset_forgets_and_seed_resumes_where_the_condition_left_off() -> None:
    window = RegistrationHealth()
    window.seed("bad", Health.UNHEALTHY)
    assert health_of(window.outcomes("bad")) is Health.UNHEALTHY
    # One success after a restart does not outvote the failures the condition stood for.
    assert window.health_after("bad", True) is Health.UNHEALTHY
    window.seed("good", Health.HEALTHY)
    assert window.health_after("good", False) is Health.HEALTHY
    window.seed("good", Health.UNHEALTHY)  # a known window is kept
    assert window.outcomes("good") == (True,)
    window.reset("bad")
    assert window.outcomes("bad") == ()
    window.seed("new", Health.UNKNOWN)
    assert window.outcomes("new") == ()
