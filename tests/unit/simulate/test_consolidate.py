"""`karpy simulate --consolidate`: what consolidation would do to a scenario's existing nodes,
run by the same pure pass as the disruption controller (docs/examples/simulate/consolidation.yaml
is the documented example)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpy.simulate.cli import EXIT_BAD_INPUT, EXIT_OK, simulate_main
from karpy.simulate.consolidate import consolidate
from karpy.simulate.reader import ScenarioError
from karpy.simulate.scenario import parse

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "simulate" / "consolidation.yaml"


def _scenario() -> dict[str, object]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_example_merges_two_half_empty_nodes_and_says_why_the_rest_stay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert simulate_main([str(EXAMPLE), "--consolidate", "-o", "json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert [(c["method"], c["decision"], c["nodes"]) for c in report["commands"]] == [
        ("multi-node-consolidation", "replace", ["web-1", "web-2"])
    ]
    assert report["commands"][0]["replacements"][0]["instanceTypes"][0] == "m.large"
    assert report["pricePerHourBefore"] == pytest.approx(0.672)
    assert report["pricePerHourAfter"] == pytest.approx(0.384)
    assert [n["name"] for n in report["before"]] == ["web-1", "web-2", "web-3", "batch-1"]
    after = {n["name"]: n for n in report["after"]}
    assert set(after) == {"batch-1", "web-1-r0", "web-3"}
    assert after["web-1-r0"]["pods"] == 2
    assert {k["node"]: k["reason"] for k in report["kept"]} == {
        "batch-1": "ConsolidationPolicy",
        "web-1-r0": "NotCheaper",
        "web-3": "NotCheaper",
    }


def test_the_table_lists_commands_nodes_prices_and_reasons(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert simulate_main([str(EXAMPLE), "--consolidate"]) == EXIT_OK
    table = capsys.readouterr().out
    assert (
        "1. multi-node-consolidation: replace web-1, web-2 with web-1-r0"
        " (m.large on-demand, 0.0960 $/h) -> 0.3840 $/h" in table
    )
    assert "BEFORE\n" in table
    assert "AFTER\n" in table
    assert "  web-3: NotCheaper: can't replace with a cheaper node" in table
    assert table.rstrip().endswith("4 -> 3 nodes, 0.6720 -> 0.3840 $/h, 1 commands")


def test_both_searches_run_and_karpenters_is_selectable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert simulate_main([str(EXAMPLE), "--consolidate", "--search", "karpenter"]) == EXIT_OK
    assert "0.6720 -> 0.3840 $/h" in capsys.readouterr().out


def test_never_and_a_blocking_budget_are_reasons() -> None:
    data = _scenario()
    pools = data["nodePools"]
    assert isinstance(pools, list)
    pools[0]["disruption"] = {"consolidateAfter": "Never"}
    scenario = parse(data)
    report = consolidate(scenario.snapshot, scenario.disruption, options=scenario.options)
    assert report.steps == ()
    assert {k.nodeclaim: k.reason.value for k in report.kept if k.nodeclaim.startswith("web")} == {
        "web-1": "ConsolidateAfterNever",
        "web-2": "ConsolidateAfterNever",
        "web-3": "ConsolidateAfterNever",
    }
    pools[0]["disruption"] = {"budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]}
    scenario = parse(data)
    report = consolidate(scenario.snapshot, scenario.disruption, options=scenario.options)
    assert report.steps == ()
    assert report.price_after == report.price_before
    assert {k.reason.value for k in report.kept if k.nodeclaim.startswith("web")} == {"Budget"}


def test_a_minimum_improvement_holds_back_a_small_saving() -> None:
    data = _scenario()
    pools, nodes = data["nodePools"], data["nodes"]
    assert isinstance(pools, list)
    assert isinstance(nodes, list)
    data["nodes"] = [n for n in nodes if n["name"] == "web-1"]
    # Replacing the lone m.xlarge by an m.large saves 50%: a 60% minimum holds it back.
    pools[0]["disruption"] = {"minimumImprovement": "60%"}
    scenario = parse(data)
    report = consolidate(scenario.snapshot, scenario.disruption, options=scenario.options)
    assert report.steps == ()
    assert [(k.nodeclaim, k.reason.value) for k in report.kept] == [
        ("web-1", "BelowMinimumImprovement")
    ]
    assert "60% on 0.1920/h" in report.kept[0].message
    pools[0]["disruption"] = {"minimumImprovement": "40%"}
    scenario = parse(data)
    report = consolidate(scenario.snapshot, scenario.disruption, options=scenario.options)
    assert [s.command.decision.value for s in report.steps] == ["replace"]
    assert report.price_after == pytest.approx(0.096)


@pytest.mark.parametrize(
    ("disruption", "message"),
    [
        ({"consolidateAfter": "soon"}, "consolidateAfter"),
        ({"minimumImprovement": "10"}, "invalid minimum price improvement"),
        ({"budgets": [{"nodes": "1", "schedule": "@daily"}]}, "schedule"),
        ({"budgets": [{"nodes": "1", "reasons": ["Bored"]}]}, "unknown disruption reason"),
        ({"consolidationPolicy": "Sometimes"}, "Sometimes"),
    ],
)
def test_bad_disruption_settings_are_refused(
    disruption: dict[str, object], message: str, tmp_path: Path
) -> None:
    data = _scenario()
    pools = data["nodePools"]
    assert isinstance(pools, list)
    pools[0]["disruption"] = disruption
    with pytest.raises(ScenarioError, match=message):
        parse(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert simulate_main([str(path), "--consolidate"]) == EXIT_BAD_INPUT
