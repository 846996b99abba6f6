"""A scenario's `nodeOverlays`: applied to every NodePool's catalog before planning, judged as
the nodeoverlay controller judges them, shown by `karpy explain`, and refused by field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.simulate.cli import explain_main
from karpy.simulate.consolidate import consolidate
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


def _fleet(overlays: list[dict[str, object]]) -> dict[str, object]:
    """One web node of the dearer type holding one small pod; the cheaper type would do."""
    offer = {"zone": "zone-a", "capacityType": "on-demand"}
    return {
        "nodePools": [{"name": "web", "disruption": {"budgets": [{"nodes": "100%"}]}}],
        "instanceTypes": {
            "items": [
                {
                    "name": "small",
                    "capacity": {"cpu": "2", "memory": "4Gi", "pods": "20"},
                    "offerings": [{**offer, "price": 0.1}],
                },
                {
                    "name": "large",
                    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                    "offerings": [{**offer, "price": 0.2}],
                },
            ]
        },
        "nodes": [
            {
                "name": "web-1",
                "labels": {
                    "node.kubernetes.io/instance-type": "large",
                    "karpenter.sh/capacity-type": "on-demand",
                    "topology.kubernetes.io/zone": "zone-a",
                },
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                "nodePool": "web",
                "pods": [{"name": "app", "requests": {"cpu": "500m", "memory": "512Mi"}}],
            }
        ],
        "nodeOverlays": overlays,
    }


def test_consolidation_values_nodes_at_overlaid_prices() -> None:
    """Without overlays the node is replaced by the cheaper type; with a Reserved Instance
    price on its own type it is already the cheapest, and consolidation keeps it."""
    plain = parse(_fleet([]))
    replaced = consolidate(plain.snapshot, plain.disruption, options=plain.options)
    assert [dict(n.labels)["node.kubernetes.io/instance-type"] for n in replaced.after] == ["small"]
    reserved = parse(
        _fleet(
            [
                {
                    "name": "reserved",
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["large"],
                        }
                    ],
                    "price": "0.01",
                }
            ]
        )
    )
    kept = consolidate(reserved.snapshot, reserved.disruption, options=reserved.options)
    assert not kept.steps
    assert kept.price_after == pytest.approx(0.01)
