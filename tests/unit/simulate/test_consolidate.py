"""`karpy simulate --consolidate`: what consolidation would do to a scenario's existing nodes,
run by the same pure pass as the disruption controller (docs/examples/simulate/consolidation.yaml
is the documented example)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


# --------------------------------------------------------------------------- what protects a node
def _kept(data: dict[str, object], *, now: float | None = None) -> dict[str, tuple[str, str]]:
    """Consolidate the scenario; each kept web node's reason and message, or 'gone'."""
    scenario = parse(data)
    report = consolidate(
        scenario.snapshot,
        scenario.disruption,
        options=scenario.options,
        now=scenario.now if now is None else now,
        protection=scenario.protection,
        pending=scenario.pods,
    )
    kept = {k.nodeclaim: (k.reason.value, k.message) for k in report.kept}
    after = {n.name for n in report.after}
    return {
        name: kept.get(name, ("Consolidated", "")) if name in after else ("Gone", "")
        for name in ("web-1", "web-2")
    }


def _web_pod(data: dict[str, object], node: str) -> dict[str, object]:
    nodes = data["nodes"]
    assert isinstance(nodes, list)
    pod = next(n for n in nodes if n["name"] == node)["pods"][0]
    assert isinstance(pod, dict)
    return pod


def test_a_do_not_disrupt_pod_keeps_its_node() -> None:
    data = _scenario()
    _web_pod(data, "web-1")["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    kept = _kept(data)
    assert kept["web-1"] == (
        "PodDoNotDisrupt",
        'pod "default/web-a" has "karpenter.sh/do-not-disrupt" annotation',
    )
    assert kept["web-2"][0] in {"Gone", "Consolidated"}  # its neighbour still goes


def test_a_do_not_disrupt_duration_counts_from_the_pods_start_time() -> None:
    data = _scenario()
    data["now"] = "2030-01-01T12:00:00Z"
    pod = _web_pod(data, "web-1")
    pod["annotations"] = {"karpenter.sh/do-not-disrupt": "30m"}
    pod["startTime"] = "2030-01-01T11:45:00Z"
    assert _kept(data)["web-1"][0] == "PodDoNotDisrupt"
    pod["startTime"] = "2030-01-01T11:00:00Z"  # protected until 11:30
    assert _kept(data)["web-1"][0] != "PodDoNotDisrupt"


def test_a_do_not_disrupt_node_is_kept() -> None:
    data = _scenario()
    nodes = data["nodes"]
    assert isinstance(nodes, list)
    nodes[0]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    assert _kept(data)["web-1"] == (
        "DoNotDisrupt",
        "disruption is blocked by the karpenter.sh/do-not-disrupt annotation on the node",
    )


@pytest.mark.parametrize(
    ("budget", "pending", "blocked"),
    [
        ({"minAvailable": 2}, 0, True),  # 2 healthy, 2 desired: none may go
        ({"minAvailable": 1}, 0, False),
        ({"maxUnavailable": 0}, 0, True),
        ({"maxUnavailable": "50%"}, 0, False),  # 1 of 2 may go
        ({"minAvailable": "50%"}, 2, True),  # 4 expected, 2 desired, 2 healthy
        ({"minAvailable": "50%"}, 0, False),
    ],
)
def test_a_pdb_keeps_a_node_as_the_kube_controller_would_count_it(
    budget: dict[str, object], pending: int, blocked: bool
) -> None:
    data = _scenario()
    data["podDisruptionBudgets"] = [
        {"name": "web", "selector": {"matchLabels": {"app": "web"}}, **budget}
    ]
    data["pods"] = [
        {"name": f"web-p{i}", "labels": {"app": "web"}, "requests": {"cpu": "100m"}}
        for i in range(pending)
    ]
    kept = _kept(data)
    if blocked:
        assert kept["web-1"] == (
            "PodDisruptionBudget",
            'pdb "default/web" prevents pod evictions (pod "default/web-a")',
        )
        assert kept["web-2"][0] == "PodDisruptionBudget"
    else:
        assert "PodDisruptionBudget" not in {reason for reason, _ in kept.values()}


def test_two_pdbs_covering_one_pod_keep_its_node() -> None:
    data = _scenario()
    data["podDisruptionBudgets"] = [
        {"name": name, "selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 2}
        for name in ("a", "b")
    ]
    assert _kept(data)["web-1"][0] == "PodDisruptionBudget"


def test_a_budget_schedule_limits_only_inside_its_window(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = _scenario()
    pools = data["nodePools"]
    assert isinstance(pools, list)
    # No disruption during office hours (09:00-17:00 UTC, Monday to Friday).
    pools[0]["disruption"]["budgets"] = [
        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}
    ]
    data["now"] = "2030-01-01T10:00:00Z"  # a Tuesday, inside the window
    assert {reason for reason, _ in _kept(data).values()} == {"Budget"}
    data["now"] = "2030-01-01T18:00:00Z"  # after it
    assert "Budget" not in {reason for reason, _ in _kept(data).values()}
    # --now overrides the scenario's clock.
    path = tmp_path / "scheduled.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert simulate_main([str(path), "--consolidate"]) == EXIT_OK
    assert "multi-node-consolidation" in capsys.readouterr().out
    assert simulate_main([str(path), "--consolidate", "--now", "2030-01-02T09:30:00Z"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "web-1: Budget:" in out
    assert "multi-node-consolidation" not in out
    assert simulate_main([str(path), "--consolidate", "--now", "tomorrow"]) == EXIT_BAD_INPUT
    assert "--now: 'tomorrow' is not an RFC 3339 time" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: _web_pod(d, "web-1").update(
                annotations={"karpenter.sh/do-not-disrupt": "yes"}
            ),
            r"nodes\[0\]\.pods\[0\]\.annotations\.karpenter\.sh/do-not-disrupt: 'yes' is neither",
        ),
        (
            lambda d: _web_pod(d, "web-1").update(startTime="2030-01-01T00:00:00"),
            r"nodes\[0\]\.pods\[0\]\.startTime: .* has no zone offset",
        ),
        (lambda d: d.update(now="soon"), r"^now: 'soon' is not an RFC 3339 time"),
        (
            lambda d: d.update(podDisruptionBudgets=[{"name": "a", "minAvailable": "150%"}]),
            r"podDisruptionBudgets\[0\]\.minAvailable: '150%' is not",
        ),
        (
            lambda d: d.update(podDisruptionBudgets=[{"name": "a", "maxUnavailable": -1}]),
            r"podDisruptionBudgets\[0\]\.maxUnavailable: must not be negative",
        ),
        (
            lambda d: d.update(
                podDisruptionBudgets=[{"name": "a", "minAvailable": 1, "maxUnavailable": 1}]
            ),
            r"podDisruptionBudgets\[0\]: minAvailable and maxUnavailable cannot both be set",
        ),
        (
            lambda d: d.update(podDisruptionBudgets=[{"name": "a"}]),
            r"podDisruptionBudgets\[0\]: set minAvailable or maxUnavailable",
        ),
        (
            lambda d: d.update(
                podDisruptionBudgets=[
                    {
                        "name": "a",
                        "minAvailable": 1,
                        "selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]},
                    }
                ]
            ),
            r"podDisruptionBudgets\[0\]\.selector\.matchExpressions\[0\]\.operator: invalid",
        ),
        (
            lambda d: d.update(
                podDisruptionBudgets=[{"name": "a", "minAvailable": 1}] * 2,
            ),
            r"podDisruptionBudgets: names must be unique per namespace: default/a repeated",
        ),
    ],
)
def test_bad_protection_is_refused_naming_the_field(edit: Any, message: str) -> None:
    data = _scenario()
    edit(data)
    with pytest.raises(ScenarioError, match=message):
        parse(data)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"nodes": "1", "schedule": "@daily"}, r"budgets\[0\]: schedule and duration"),
        ({"nodes": "1", "duration": "1h"}, r"budgets\[0\]: schedule and duration"),
        (
            {"nodes": "1", "schedule": "61 * * * *", "duration": "1h"},
            r"budgets\[0\]\.schedule: .*61",
        ),
        (
            {"nodes": "1", "schedule": "@daily", "duration": "Never"},
            r"budgets\[0\]\.duration: Never is not a window length",
        ),
        (
            {"nodes": "1", "schedule": "@daily", "duration": "a while"},
            r"budgets\[0\]\.duration: 'a while' is not a duration",
        ),
        ({"nodes": "lots"}, r"budgets\[0\]\.nodes: 'lots' is not an integer or a percentage"),
    ],
)
def test_bad_budgets_are_refused_naming_the_field(budget: dict[str, object], message: str) -> None:
    data = _scenario()
    pools = data["nodePools"]
    assert isinstance(pools, list)
    pools[0]["disruption"]["budgets"] = [budget]
    with pytest.raises(ScenarioError, match=message):
        parse(data)


PROTECTED = EXAMPLE.with_name("protected.yaml")


def test_the_protected_example_keeps_every_node_until_the_pods_protection_runs_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert simulate_main([str(PROTECTED), "--consolidate", "-o", "json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["commands"] == []
    assert {k["node"]: k["reason"] for k in report["kept"]} == {
        "web-1": "PodDoNotDisrupt",
        "web-2": "PodDisruptionBudget",
        "web-3": "PodDisruptionBudget",
        "web-4": "DoNotDisrupt",
    }
    later = [str(PROTECTED), "--consolidate", "-o", "json", "--now", "2030-01-01T12:30:00Z"]
    assert simulate_main(later) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert [(c["decision"], c["nodes"]) for c in report["commands"]] == [("delete", ["web-1"])]
