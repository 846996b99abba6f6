"""The one duration grammar: Go's, read the same way for API fields, flags and provider settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.duration import duration_seconds, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1s", 1.0, id="s"),
        pytest.param("500ms", 0.5, id="ms"),
        pytest.param("1m30s", 90.0, id="m-s"),
        pytest.param("1h", 3600.0, id="h"),
        pytest.param("1.5s", 1.5, id="fraction"),
        pytest.param("0", 0.0, id="zero"),
    ],
)
def test_parse_duration_go_syntax(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1", "-1s", "1d", "1s2"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds(text)


@given(st.integers(min_value=1, max_value=10**7))
def test_format_then_parse_round_trips_milliseconds(millis: int) -> None:
    seconds = millis / 1000
    assert duration_seconds(format_duration(seconds)) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["0s", "720h", "1h30m", "90s", "500ms", "1.5h"])
def test_api_fields_and_options_read_the_same_grammar(text: str) -> None:
    parsed = parse_duration(text, field_name="spec.expireAfter")
    assert parsed is not None
    assert parsed.total_seconds() == pytest.approx(duration_seconds(text))


def test_api_field_error_names_the_field_and_the_problem() -> None:
    with pytest.raises(ValueError, match=r"^spec\.expireAfter: invalid duration '1d'"):
        parse_duration("1d", field_name="spec.expireAfter")
