"""A scenario's `nodeOverlays`: applied to every NodePool's catalog before planning, judged as
the nodeoverlay controller judges them, shown by `karpy explain`, and refused by field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.simulate.cli import explain_main
from karpy.simulate.reader import ScenarioError
from karpy.simulate.scenario import parse

GOLDEN = Path(__file__).parent / "golden" / "node-overlays.yaml"

BASE: dict[str, object] = {
    "nodePools": [{"name": "default"}],
    "instanceTypes": {"provider": "fake", "count": 4},
}


def test_explain_names_the_overlays_applied_to_the_chosen_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert explain_main([str(GOLDEN), "app"]) == 0
    out = capsys.readouterr().out
    assert "2 instance types from large" in out
    assert "overlays on large: price of zone-a/on-demand from savings-plan" in out
    assert explain_main([str(GOLDEN), "gadget", "-o", "json"]) == 0
    assert '"example.com/widget": "widgets"' in capsys.readouterr().out


def test_overlays_change_the_catalog_and_conflicts_are_reported() -> None:
    scenario = parse(
        {
            **BASE,
            "nodeOverlays": [
                {"name": "b", "weight": 2, "price": "0.001"},
                {"name": "a", "weight": 2, "priceAdjustment": "-10%"},
            ],
        }
    )
    assert dict(scenario.overlays.conflicts) == {"a": "b"}
    prices = {o.price for t in scenario.snapshot.instance_types["default"] for o in t.offerings}
    assert prices == {0.001}


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        pytest.param(
            {"name": "x", "price": "1", "priceAdjustment": "+1"},
            "nodeOverlays[0]: cannot set both 'price' and 'priceAdjustment'",
            id="both-prices",
        ),
        pytest.param(
            {"name": "x", "capacity": {"memory": "1Gi"}},
            "nodeOverlays[0]: capacity: memory may not be overlaid",
            id="standard-resource",
        ),
        pytest.param({"name": "x", "cost": "1"}, "unknown field(s) cost", id="unknown-key"),
        pytest.param({"price": "1"}, "nodeOverlays[0].name: is required", id="no-name"),
    ],
)
def test_a_bad_overlay_is_refused_naming_its_field(
    overlay: dict[str, object], message: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse({**BASE, "nodeOverlays": [overlay]})
    assert message in str(caught.value)
