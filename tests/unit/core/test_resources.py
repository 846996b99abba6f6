"""Quantities parse and compare as Kubernetes does; effective requests follow KEP-753."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.pods import Container, Pod, PodUID, effective_requests
from karpy.core.resources import (
    QuantityError,
    Resources,
    format_quantity,
    parse_quantity,
    parse_quantity_exact,
)


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("100m", 100, id="milli"),
        pytest.param("1", 1000, id="plain"),
        pytest.param("1.5", 1500, id="decimal"),
        pytest.param("1Ki", 1024 * 1000, id="binary"),
        pytest.param("1Gi", 2**30 * 1000, id="gibi"),
        pytest.param("1k", 1000 * 1000, id="kilo"),
        pytest.param("2M", 2 * 10**6 * 1000, id="mega"),
        pytest.param("1e3", 1000 * 1000, id="exponent"),
        pytest.param("1E-3", 1, id="negative-exponent"),
        pytest.param("1u", 1, id="micro-rounds-up"),
        pytest.param("1n", 1, id="nano-rounds-up"),
        pytest.param(".5", 500, id="leading-dot"),
        pytest.param("+2", 2000, id="sign"),
        pytest.param(3, 3000, id="int"),
        pytest.param(0.25, 250, id="float"),
    ],
)
def test_parse_quantity(text: str | int | float, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("bad", ["", "1.2.3", "12Q", "Gi", "1 Gi", "1iB", "abc", "--1"])
def test_bad_quantities_are_rejected_with_the_text_quoted(bad: str) -> None:
    with pytest.raises(QuantityError, match="not a valid Kubernetes quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize("spaced", [" 1Gi", "1Gi ", "100m\n", "\t2"])
def test_whitespace_around_a_quantity_is_rejected_as_kubernetes_does(spaced: str) -> None:
    with pytest.raises(QuantityError, match="leading or trailing whitespace"):
        parse_quantity(spaced)


def test_booleans_are_not_quantities() -> None:
    with pytest.raises(QuantityError, match="boolean"):
        parse_quantity(True)


def test_exact_parse_keeps_fractions() -> None:
    assert parse_quantity_exact("0.1") == Fraction(1, 10)
    assert parse_quantity_exact("1Mi") == 2**20


def test_equal_quantities_in_different_spellings_compare_equal() -> None:
    assert parse_quantity("1Gi") == parse_quantity("1024Mi") == parse_quantity(str(2**30))
    assert parse_quantity("1000m") == parse_quantity("1")
    assert parse_quantity("1G") < parse_quantity("1Gi")


@given(st.integers(0, 10**6), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi"]))
def test_parsing_is_monotonic_in_the_number(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") <= parse_quantity(f"{n + 1}{suffix}")


def test_format_round_trips_common_values() -> None:
    assert format_quantity("cpu", 1500) == "1500m"
    assert format_quantity("cpu", 2000) == "2"
    assert format_quantity("memory", parse_quantity("512Mi")) == "512Mi"
    assert format_quantity("pods", 29000) == "29"


def test_resources_arithmetic_and_fit() -> None:
    a = Resources.of({"cpu": "1", "memory": "1Gi"})
    b = Resources.of({"cpu": "500m"})
    assert (a + b).get_amount("cpu") == 1500
    assert (a - b).get_amount("cpu") == 500
    assert b.fits(a)
    assert not a.fits(b)
    assert a.exceeded(b) == ("cpu", "memory")
    assert Resources.of({"cpu": "1"}) == Resources.of({"cpu": "1000m"})
    assert b.scaled(3).get_amount("cpu") == 1500


def test_explicit_zero_is_kept() -> None:
    assert "cpu" in Resources.of({"cpu": 0})


def _pod(containers: tuple[Container, ...], inits: tuple[Container, ...] = (), **kw: object) -> Pod:
    return Pod(PodUID("u"), "ns", "p", containers=containers, init_containers=inits, **kw)  # type: ignore[arg-type]


def _c(cpu: str, *, sidecar: bool = False) -> Container:
    return Container("c", Resources.of({"cpu": cpu}), restart_always=sidecar)


def test_effective_requests_sum_containers_and_count_one_pod() -> None:
    req = effective_requests(_pod((_c("1"), _c("500m"))))
    assert req.get_amount("cpu") == 1500
    assert req.get_amount("pods") == 1000


def test_a_large_init_container_dominates() -> None:
    assert effective_requests(_pod((_c("1"),), (_c("3"),))).get_amount("cpu") == 3000


def test_sidecars_add_to_the_main_containers() -> None:
    req = effective_requests(_pod((_c("1"),), (_c("500m", sidecar=True), _c("1"))))
    # max(1 + 0.5 sidecar, init 1 + sidecar 0.5 started before it) = 1.5
    assert req.get_amount("cpu") == 1500


def test_init_container_after_sidecar_includes_the_sidecar() -> None:
    req = effective_requests(_pod((_c("100m"),), (_c("1", sidecar=True), _c("2"))))
    assert req.get_amount("cpu") == 3000


def test_overhead_is_added() -> None:
    overhead = Resources.of({"cpu": "250m"})
    assert effective_requests(_pod((_c("1"),), overhead=overhead)).get_amount("cpu") == 1250


def test_non_cpu_resources_are_read_in_whole_units_like_value() -> None:
    assert Resources.of({"memory": "1.5"}).get_amount("memory") == 2000
    assert Resources.of({"memory": "100m"}).get_amount("memory") == 1000
    assert Resources.of({"cpu": "0.0001"}).get_amount("cpu") == 1
    assert Resources.of({"nvidia.com/gpu": "1"}).get_amount("nvidia.com/gpu") == 1000


def test_a_pod_takes_one_pod_slot_whatever_its_overhead_says() -> None:
    """kube-scheduler counts pods, not a ``pods`` resource: overhead cannot take more slots."""
    overhead = Resources.of({"cpu": "250m", "pods": "1"})
    requests = effective_requests(_pod((_c("1"),), overhead=overhead))
    assert (requests.get_amount("pods"), requests.get_amount("cpu")) == (1000, 1250)
