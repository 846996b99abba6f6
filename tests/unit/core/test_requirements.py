"""Requirement set algebra: operators, intersection laws and readable incompatibilities."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.requirements import Operator, Requirement, RequirementError, Requirements

VALUES = ["a", "b", "c", "-2", "0", "1", "2", "5", "10"]


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    op = draw(st.sampled_from(list(Operator)))
    if op in (Operator.IN, Operator.NOT_IN):
        vals = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=4, unique=True))
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        vals = []
    else:
        vals = [str(draw(st.integers(-3, 12)))]
    return Requirement.new("k", op, vals)


@given(requirements(), requirements(), st.sampled_from(VALUES))
def test_intersection_has_exactly_the_shared_values(a: Requirement, b: Requirement, v: str) -> None:
    assert a.intersection(b).has(v) == (a.has(v) and b.has(v))


@given(requirements(), requirements(), st.sampled_from(VALUES))
def test_intersection_commutes(a: Requirement, b: Requirement, v: str) -> None:
    assert a.intersection(b).has(v) == b.intersection(a).has(v)
    assert a.intersects(b) == b.intersects(a)


@given(requirements(), st.sampled_from(VALUES))
def test_intersection_is_idempotent(a: Requirement, v: str) -> None:
    assert a.intersection(a).has(v) == a.has(v)


@pytest.mark.parametrize(
    ("op", "values", "yes", "no"),
    [
        pytest.param("In", ["a", "b"], ["a", "b"], ["c"], id="in"),
        pytest.param("NotIn", ["a"], ["b", "z"], ["a"], id="not-in"),
        pytest.param("Exists", [], ["a", "1"], [], id="exists"),
        pytest.param("DoesNotExist", [], [], ["a"], id="does-not-exist"),
        pytest.param("Gt", ["4"], ["5", "10"], ["4", "3", "x"], id="gt"),
        pytest.param("Lt", ["4"], ["3", "0"], ["4", "x"], id="lt"),
        pytest.param("Gte", ["4"], ["4", "5"], ["3"], id="gte"),
        pytest.param("Lte", ["4"], ["4", "0"], ["5"], id="lte"),
    ],
)
def test_operators(op: str, values: list[str], yes: list[str], no: list[str]) -> None:
    req = Requirement.new("k", op, values)
    assert all(req.has(v) for v in yes)
    assert not any(req.has(v) for v in no)


def test_absent_labels_satisfy_not_in_and_does_not_exist_only() -> None:
    assert Requirement.new("k", "NotIn", ["a"]).allows_absent()
    assert Requirement.new("k", "DoesNotExist").allows_absent()
    assert not Requirement.new("k", "Exists").allows_absent()
    assert not Requirement.new("k", "In", ["a"]).allows_absent()
    assert not Requirement.new("k", "Gt", ["1"]).allows_absent()


def test_bounds_that_leave_nothing_become_empty() -> None:
    both = Requirement.new("k", "Gt", ["5"]).intersection(Requirement.new("k", "Lt", ["6"]))
    assert both.is_empty()


def test_in_narrowed_by_gt() -> None:
    narrowed = Requirement.new("k", "In", ["1", "5", "x"]).intersection(
        Requirement.new("k", "Gt", ["2"])
    )
    assert narrowed.values == {"5"}


def test_min_values_take_the_larger_side() -> None:
    a = Requirement.new("k", "Exists", min_values=2)
    b = Requirement.new("k", "In", ["a", "b", "c"], min_values=3)
    assert a.intersection(b).min_values == 3


@pytest.mark.parametrize(
    ("op", "values", "kwargs", "message"),
    [
        pytest.param("In", [], {}, "needs values", id="in-empty"),
        pytest.param("Lt", ["a"], {}, "needs an integer", id="lt-text"),
        pytest.param("Gt", ["1_0"], {}, "needs an integer", id="gt-underscore"),
        pytest.param("Gt", [" 5"], {}, "needs an integer", id="gt-space"),
        pytest.param("Lt", [str(2**63)], {}, "needs an integer", id="lt-beyond-int64"),
        pytest.param("Gt", ["1", "2"], {}, "exactly one value", id="gt-two"),
        pytest.param("Near", ["a"], {}, "unknown operator", id="operator"),
        pytest.param("In", ["a"], {"min_values": 2}, "fewer than minValues", id="min-values"),
        pytest.param("Exists", [], {"min_values": 0}, "at least 1", id="min-values-zero"),
    ],
)
def test_bad_requirements_name_the_key(
    op: str, values: list[str], kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(RequirementError, match=message) as err:
        Requirement.new("my-key", op, values, **kwargs)
    assert "my-key" in str(err.value)


def test_deprecated_keys_are_normalised() -> None:
    req = Requirement.new("failure-domain.beta.kubernetes.io/zone", "In", ["a"])
    assert req.key == wk.LABEL_TOPOLOGY_ZONE


def test_adding_a_key_twice_intersects() -> None:
    reqs = Requirements(
        [Requirement.new("k", "In", ["a", "b"]), Requirement.new("k", "In", ["b", "c"])]
    )
    assert reqs.get("k") == Requirement.new("k", "In", ["b"])


def test_compatible_allows_undefined_well_known_keys_only() -> None:
    node = Requirements([Requirement.new("team", "In", ["a"])])
    zone = Requirements([Requirement.new(wk.LABEL_TOPOLOGY_ZONE, "In", ["z"])])
    custom = Requirements([Requirement.new("gpu", "Exists")])
    absent_ok = Requirements([Requirement.new("gpu", "DoesNotExist")])
    allow = frozenset({wk.LABEL_TOPOLOGY_ZONE})
    assert node.compatible(zone, allow_undefined=allow) is None
    bad = node.compatible(custom, allow_undefined=allow)
    assert bad is not None
    assert bad.key == "gpu"
    assert bad.message() == "gpu Exists: no label gpu is defined there"
    assert node.compatible(absent_ok) is None


def test_conflict_explains_both_sides() -> None:
    a = Requirements([Requirement.new("k", "In", ["a"])])
    b = Requirements([Requirement.new("k", "In", ["b"])])
    bad = a.conflict(b)
    assert bad is not None
    assert bad.message() == "k In [b] does not match k In [a]"


def test_matches_labels_uses_selector_semantics() -> None:
    reqs = Requirements([Requirement.new("a", "In", ["1"]), Requirement.new("b", "NotIn", ["x"])])
    assert reqs.matches_labels({"a": "1"}) is None
    assert reqs.matches_labels({"a": "1", "b": "x"}) is not None
    assert reqs.matches_labels({}) is not None


def test_describe_orders_numbers_numerically() -> None:
    assert Requirement.new("k", "In", ["10", "9", "a"]).describe() == "k In [9, 10, a]"


def test_negative_integer_bounds_are_accepted_as_kubernetes_does() -> None:
    gt = Requirement.new("k", "Gt", ["-3"])
    assert gt.has("-2")
    assert gt.has("0")
    assert not gt.has("-3")
    lt = Requirement.new("k", "Lt", ["-1"])
    assert lt.has("-5")
    assert not lt.has("0")
    assert Requirement.new("k", "Gte", ["-1"]).has("-1")


def test_label_values_are_read_as_integers_only_when_go_would() -> None:
    gt = Requirement.new("k", "Gt", ["5"])
    assert gt.has("+10")
    assert not gt.has("1_0")
    assert not gt.has(" 10")


def _both(low: str, high: str) -> Requirement:
    return Requirement.new("k", "Gt", [low]).intersection(Requirement.new("k", "Lt", [high]))


def test_describe_keeps_both_bounds_and_a_bound_of_zero() -> None:
    assert _both("1", "5").describe() == "k Gt 1, Lt 5"
    assert _both("0", "3").describe() == "k Gt 0, Lt 3"
    assert Requirement.new("k", "Lt", ["0"]).describe() == "k Lt 0"
    excluded = Requirement.new("k", "NotIn", ["2"]).intersection(_both("0", "8"))
    assert excluded.describe() == "k NotIn [2], Gt 0, Lt 8"
    assert _both("1", "5").expressions() == ((Operator.GT, ("1",)), (Operator.LT, ("5",)))


@given(requirements(), requirements(), st.sampled_from(VALUES))
def test_expressions_mean_exactly_the_set(a: Requirement, b: Requirement, v: str) -> None:
    req = a.intersection(b)
    parts = [Requirement.new("k", op, values) for op, values in req.expressions()]
    rebuilt = parts[0]
    for part in parts[1:]:
        rebuilt = rebuilt.intersection(part)
    assert rebuilt.has(v) == req.has(v)
    assert rebuilt.allows_absent() == req.allows_absent()
    assert req.operator is req.expressions()[0][0]
