"""A NodePool's cost cap (spec.limits karpy.sh/cost-per-hour) in the pure scheduler: launches
stop at the cap, each charged its dearest possible offering; existing nodes count at their own
offering's price; the explanation says which cap and how much is left."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod
from karpy.core.resources import Resources
from karpy.core.scheduling.cost import COST, price_milli
from karpy.core.scheduling.results import ReasonKind
from karpy.core.snapshot import NodePool
from tests.unit.core import builders as b

# One type: a whole node per pod, $0.40/h on demand in every zone.
ONLY = b.instance_type("it-4", 4, 8, price=0.4)


def _pool(cap: str) -> NodePool:
    return b.nodepool(limits=Resources.of({COST: cap}))


def _pods(n: int) -> list[Pod]:
    return b.pods(n, "big", cpu="3")


def test_launches_stop_at_the_cap_and_the_explanation_says_why() -> None:
    snap = b.snapshot([_pool("1")], types=[ONLY])
    results = b.run(snap, _pods(5))
    assert len(results.nodeclaims) == 2  # 2 x 0.40 fits in 1.00; a third would make 1.20
    assert len(results.unplaced) == 3
    found = next(p for p in results.unplaced[0].nodepools if p.nodepool == "default")
    step = found.blocking()
    assert step is not None
    assert step.kind is ReasonKind.LIMIT
    assert step.detail == (
        "nodepool limits karpy.sh/cost-per-hour=1 ($0.200/h left, the cheapest launch needs"
        " $0.400/h)"
    )


def test_a_launch_is_charged_its_dearest_offering() -> None:
    # Spot at 0.16, on demand at 0.40: the provider may launch either, so 0.40 is charged.
    both = b.instance_type(
        "it-4", 4, 8, price=0.4, capacity_types=(wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
    )
    results = b.run(b.snapshot([_pool("1")], types=[both]), _pods(5))
    assert len(results.nodeclaims) == 2


def test_existing_nodes_count_at_their_offerings_price() -> None:
    labels = {
        wk.LABEL_INSTANCE_TYPE: "it-4",
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND,
        wk.LABEL_NODEPOOL: "default",
    }
    full = b.node("old", labels=labels, nodepool_name="default", pods_=b.pods(1, "busy", cpu="3"))
    snap = b.snapshot([_pool("1")], types=[ONLY], nodes=[full])
    results = b.run(snap, _pods(5))
    assert len(results.nodeclaims) == 1  # 0.40 held + 0.40 new; another would cross 1.00


def test_no_cap_no_charge() -> None:
    results = b.run(b.snapshot(types=[ONLY]), _pods(5))
    assert len(results.nodeclaims) == 5


@pytest.mark.parametrize(
    ("price", "milli"),
    [
        pytest.param(0.4, 400, id="exact"),
        pytest.param(0.3168, 317, id="rounded-up"),
        pytest.param(0.0, 0, id="free"),
    ],
)
def test_prices_round_up_to_a_tenth_of_a_cent(price: float, milli: int) -> None:
    assert price_milli(price) == milli


def test_a_fractional_cap_is_kept_to_the_tenth_of_a_cent() -> None:
    # $1.20 holds three launches of $0.40 but not four (a cap rounded to whole dollars would
    # allow five, or two).
    results = b.run(b.snapshot([_pool("1.2")], types=[ONLY]), _pods(5))
    assert len(results.nodeclaims) == 3
    assert Resources.of({COST: "1.2"})[COST] == 1200


@given(
    cap_cents=st.integers(0, 400),
    price_cents=st.integers(1, 120),
    pods=st.integers(0, 8),
    held=st.integers(0, 2),
)
def test_the_pool_launches_exactly_what_the_cap_pays_for(
    cap_cents: int, price_cents: int, pods: int, held: int
) -> None:
    """One whole node per pod: with `held` nodes already running, the pool launches as many
    as the rest of the cap pays for, and never more."""
    price = price_cents / 100
    only = b.instance_type("it-4", 4, 8, price=price, zones=("zone-a",))
    labels = {
        wk.LABEL_INSTANCE_TYPE: "it-4",
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND,
        wk.LABEL_NODEPOOL: "default",
    }
    nodes = [
        b.node(
            f"old-{i}", labels=labels, nodepool_name="default", pods_=b.pods(1, f"busy{i}", cpu="3")
        )
        for i in range(held)
    ]
    snap = b.snapshot([_pool(f"{cap_cents / 100}")], types=[only], nodes=nodes)
    results = b.run(snap, _pods(pods))
    affordable = max(0, cap_cents // price_cents - held)
    assert len(results.nodeclaims) == min(pods, affordable)
    assert len(results.unplaced) == pods - min(pods, affordable)
