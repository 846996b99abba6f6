"""NodeOverlays in the pure core: Karpenter's order (weight, then name), first overlay wins per
offering price and per resource, same-weight conflicts rejected whole, and what the scheduler
then does with the overlaid catalog (a dearer type made cheapest is launched; an added
extended resource makes a pod asking for it schedulable)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.overlays import (
    Overlay,
    OverlayError,
    PoolCatalog,
    PriceChange,
    applied,
    apply,
    make_overlay,
    order,
    pool_requirements,
    resolve,
)
from tests.unit.core import builders as b

POOL = pool_requirements("default", {"team": "web"})
SMALL = b.instance_type("small", 2, 4, price=0.10)
LARGE = b.instance_type("large", 4, 8, price=0.20)
SPOTTY = b.instance_type(
    "spotty",
    2,
    4,
    price=0.30,
    capacity_types=(wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND),
)
CATALOG = (SMALL, LARGE, SPOTTY)


def _types(*overlays: Overlay) -> dict[str, InstanceType]:
    return {t.name: t for t in apply(CATALOG, POOL, order(overlays))}


def _select(name: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    return ((wk.LABEL_INSTANCE_TYPE, "In", (name,)),)


# ------------------------------------------------------------------------- reading a spec


@pytest.mark.parametrize(
    ("text", "field", "before", "after"),
    [
        pytest.param("0.05", "spec.price", 0.2, 0.05, id="price"),
        pytest.param("+0.5", "spec.priceAdjustment", 0.2, 0.7, id="plus"),
        pytest.param("-0.1", "spec.priceAdjustment", 0.2, 0.1, id="minus"),
        pytest.param("-10%", "spec.priceAdjustment", 0.2, 0.18, id="percent-off"),
        pytest.param("+50%", "spec.priceAdjustment", 0.2, 0.3, id="percent-on"),
        pytest.param("-1", "spec.priceAdjustment", 0.2, 0.0, id="floored-at-zero"),
        pytest.param("-100%", "spec.priceAdjustment", 0.2, 0.0, id="free"),
    ],
)
def test_price_and_adjustment_change_the_provider_price(
    text: str, field: str, before: float, after: float
) -> None:
    assert PriceChange.parse(text, field=field).apply(before) == pytest.approx(after)


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        pytest.param({"price": "1", "price_adjustment": "+1"}, "'priceAdjustment'", id="both"),
        pytest.param({"price_adjustment": "10%"}, "spec.priceAdjustment", id="unsigned-pct"),
        pytest.param({"price_adjustment": "-150%"}, "spec.priceAdjustment", id="below-100"),
        pytest.param({"price": "-1"}, "spec.price", id="negative-price"),
        pytest.param({"capacity": {"cpu": "2"}}, "spec.capacity: cpu", id="standard-resource"),
        pytest.param({"capacity": {"example.com/w": "lots"}}, "spec.capacity", id="quantity"),
        pytest.param(
            {"requirements": [("karpy.sh/n", "Gt", ("x",))]},
            "spec.requirements[0]",
            id="bound",
        ),
        pytest.param({"weight": 0}, "spec.weight", id="weight"),
    ],
)
def test_a_spec_karpy_cannot_read_is_refused_naming_the_field(
    fields: dict[str, object], names: str
) -> None:
    with pytest.raises(OverlayError) as caught:
        make_overlay("bad", **fields)  # type: ignore[arg-type]
    assert names in str(caught.value)


# ------------------------------------------------------------------------- applying


def test_price_overlay_selects_types_and_offerings_by_requirements() -> None:
    spot_only = make_overlay(
        "spot-discount",
        requirements=(
            *_select("spotty"),
            (wk.LABEL_CAPACITY_TYPE, "In", (wk.CAPACITY_TYPE_SPOT,)),
        ),
        price="0.01",
    )
    types = _types(spot_only)
    spotty = types["spotty"]
    assert {o.price for o in spotty.offerings if o.capacity_type == wk.CAPACITY_TYPE_SPOT} == {0.01}
    assert {o.price for o in spotty.offerings if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND} == {
        0.30
    }
    assert spotty.offerings[0].price == 0.01  # offerings stay cheapest first
    assert types["small"] is SMALL  # not selected: returned as it was


def test_requirements_see_the_pool_name_and_template_labels() -> None:
    mine = make_overlay("mine", requirements=(("team", "In", ("web",)),), price="0.01")
    theirs = make_overlay("theirs", requirements=(("team", "In", ("db",)),), price="0.02")
    other_pool = make_overlay(
        "other-pool", requirements=((wk.LABEL_NODEPOOL, "In", ("batch",)),), price="0.03"
    )
    undefined = make_overlay("undefined", requirements=(("gpu", "Exists", ()),), price="0.04")
    types = _types(mine, theirs, other_pool, undefined)
    assert {o.price for t in types.values() for o in t.offerings} == {0.01}


def test_capacity_adds_extended_resources_and_keeps_the_rest() -> None:
    widget = make_overlay(
        "widget", requirements=_select("large"), capacity={"example.com/widget": "2"}
    )
    large = _types(widget)["large"]
    assert large.capacity.get_amount("example.com/widget") == 2000
    assert large.capacity.get_amount("cpu") == LARGE.capacity.get_amount("cpu")
    assert large.offerings == LARGE.offerings


def test_higher_weight_wins_the_price_and_each_resource_separately() -> None:
    heavy = make_overlay("heavy", weight=10, price="0.01", capacity={"example.com/a": "1"})
    light = make_overlay(
        "light",
        weight=1,
        price_adjustment="-50%",
        capacity={"example.com/a": "9", "example.com/b": "3"},
    )
    small = _types(light, heavy)["small"]
    assert {o.price for o in small.offerings} == {0.01}
    assert small.capacity.get_amount("example.com/a") == 1000
    assert small.capacity.get_amount("example.com/b") == 3000
    what = applied(SMALL, POOL, order([light, heavy]))
    assert set(what.prices.values()) == {"heavy"}
    assert dict(what.capacity) == {"example.com/a": "heavy", "example.com/b": "light"}
    assert what.overlays == ("heavy", "light")


def test_equal_weights_changing_the_same_price_conflict_and_the_later_is_rejected() -> None:
    a = make_overlay("a", weight=5, requirements=_select("small"), price="0.01")
    z = make_overlay("z", weight=5, requirements=_select("small"), price="0.02")
    elsewhere = make_overlay("elsewhere", weight=5, requirements=_select("large"), price="0.5")
    widget = make_overlay("widget", weight=5, capacity={"example.com/w": "1"})
    resolution = resolve([a, z, elsewhere, widget], [PoolCatalog(POOL, CATALOG)])
    # Equal weights: the later name goes first, so z is accepted and a conflicts with it.
    assert dict(resolution.conflicts) == {"a": "z"}
    assert [o.name for o in resolution.accepted] == ["z", "widget", "elsewhere"]


def test_equal_weights_naming_the_same_resource_conflict() -> None:
    one = make_overlay("one", weight=3, capacity={"example.com/w": "1"})
    two = make_overlay(
        "two", weight=3, requirements=_select("large"), capacity={"example.com/w": "2"}
    )
    resolution = resolve([one, two], [PoolCatalog(POOL, CATALOG)])
    assert dict(resolution.conflicts) == {"one": "two"}


def test_overlays_that_select_nothing_never_conflict() -> None:
    one = make_overlay("one", requirements=_select("nothing"), price="1")
    two = make_overlay("two", requirements=_select("nothing"), price="2")
    assert resolve([one, two], [PoolCatalog(POOL, CATALOG)]).conflicts == {}


def test_a_cheaper_overlaid_type_is_what_the_scheduler_launches() -> None:
    pods = b.pods(1, "web", cpu="1")
    before = b.run(b.snapshot([b.nodepool()], types=CATALOG), pods)
    assert before.nodeclaims[0].instance_types[0] == "small"
    discount = make_overlay("ri", requirements=_select("large"), price="0.01")
    overlaid = apply(CATALOG, pool_requirements("default", {}), [discount])
    after = b.run(b.snapshot([b.nodepool()], types=overlaid), pods)
    assert after.nodeclaims[0].instance_types[0] == "large"
    assert after.nodeclaims[0].price == pytest.approx(0.01)


def test_an_added_extended_resource_lets_a_pod_asking_for_it_schedule() -> None:
    pods = [b.pod("gadget", cpu="1", extra={"example.com/widget": "1"})]
    assert len(b.run(b.snapshot([b.nodepool()], types=CATALOG), pods).unplaced) == 1
    widget = make_overlay(
        "widget", requirements=_select("large"), capacity={"example.com/widget": "4"}
    )
    overlaid = apply(CATALOG, pool_requirements("default", {}), [widget])
    results = b.run(b.snapshot([b.nodepool()], types=overlaid), pods)
    assert not results.unplaced
    assert results.nodeclaims[0].instance_types == ("large",)


# ------------------------------------------------------------------------- properties

_NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
_PRICE = st.one_of(
    st.none(),
    st.builds(lambda v: f"{v / 100:.2f}", st.integers(0, 100)),
)
_ADJUST = st.one_of(
    st.none(),
    st.builds(lambda v: f"{v:+d}%", st.integers(-100, 100).filter(lambda v: v != 0)),
)


@st.composite
def _overlays(draw: st.DrawFn) -> list[Overlay]:
    names = draw(st.lists(_NAMES, unique=True, max_size=5))
    out = []
    for name in names:
        price = draw(_PRICE)
        adjust = None if price is not None else draw(_ADJUST)
        selected = draw(st.sets(st.sampled_from([t.name for t in CATALOG])))
        resources = draw(
            st.dictionaries(st.sampled_from(["example.com/a", "example.com/b"]), st.integers(1, 9))
        )
        out.append(
            make_overlay(
                name,
                requirements=((wk.LABEL_INSTANCE_TYPE, "In", tuple(sorted(selected))),)
                if selected
                else (),
                weight=draw(st.one_of(st.none(), st.integers(1, 3))),
                price=price,
                price_adjustment=adjust,
                capacity={k: str(v) for k, v in resources.items()},
            )
        )
    return out


@given(_overlays(), st.randoms())
def test_resolution_and_catalog_do_not_depend_on_the_input_order(
    overlays: list[Overlay], rnd: object
) -> None:
    shuffled = list(overlays)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    catalogs = [PoolCatalog(POOL, CATALOG)]
    first, second = resolve(overlays, catalogs), resolve(shuffled, catalogs)
    assert first == second
    assert apply(CATALOG, POOL, first.accepted) == apply(CATALOG, POOL, second.accepted)


@given(_overlays())
def test_order_is_by_weight_then_later_name_first(overlays: list[Overlay]) -> None:
    ordered = order(overlays)
    keys = [(-o.weight, tuple(-ord(c) for c in o.name)) for o in ordered]
    assert keys == sorted(keys)
    assert order(ordered) == ordered


@given(_overlays())
def test_each_offering_price_comes_from_its_highest_ranked_overlay(
    overlays: list[Overlay],
) -> None:
    accepted = resolve(overlays, [PoolCatalog(POOL, CATALOG)]).accepted
    for before, after in zip(CATALOG, apply(CATALOG, POOL, accepted), strict=True):
        for offering in before.offerings:
            setters = [
                o
                for o in accepted
                if o.price is not None
                and offering
                in tuple(
                    x
                    for x in before.offerings
                    if x.matches(o.requirements)
                    and POOL.merge(before.requirements).compatible(o.requirements) is None
                )
            ]
            got = next(
                x.price
                for x in after.offerings
                if (x.zone, x.capacity_type) == (offering.zone, offering.capacity_type)
            )
            want = setters[0].price.apply(offering.price) if setters else offering.price  # type: ignore[union-attr]
            assert got == pytest.approx(want)
        # Never two accepted overlays of one weight on the same offering's price (overlays
        # here select whole types, so two selecting this type share its offerings).
        weights = [
            o.weight for o in accepted if o.price is not None and applied(before, POOL, [o]).prices
        ]
        assert len(weights) == len(set(weights)) or not weights


@given(_overlays())
def test_applying_to_the_provider_catalog_is_a_function_of_it(overlays: list[Overlay]) -> None:
    """The wrapper applies overlays to the provider's catalog on every fetch: the same catalog
    and overlays give the same result, no overlays give the catalog itself, and absolute
    prices and capacities applied again change nothing more."""
    accepted = resolve(overlays, [PoolCatalog(POOL, CATALOG)]).accepted
    once = apply(CATALOG, POOL, accepted)
    assert once == apply(CATALOG, POOL, accepted)
    assert apply(CATALOG, POOL, ()) == CATALOG
    absolute = [o for o in accepted if o.price is None or o.price.mode.value == "set"]
    twice = apply(apply(CATALOG, POOL, absolute), POOL, absolute)
    assert twice == apply(CATALOG, POOL, absolute)
