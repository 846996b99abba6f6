"""docs/settings.md and docs/metrics.md are exactly what the code that defines them renders."""

from __future__ import annotations

import json
import re
from pathlib import Path

from karpy.runtime.reference import main, render_metrics, render_settings, served_metrics, stale
from karpy.runtime.telemetry import NOT_SERVED


def test_committed_reference_matches_the_code() -> None:
    assert stale() == [], "regenerate with `python -m karpy.runtime.reference`"
    assert main(["--check"]) == 0


def test_reference_names_every_setting_and_karpenters_metrics() -> None:
    settings = render_settings()
    assert "| `BATCH_IDLE_DURATION` | `--batch-idle-duration` |" in settings
    assert "`FEATURE_GATES`" in settings
    metrics = render_metrics()
    for name in (
        "karpenter_nodeclaims_created_total",
        "karpenter_scheduler_scheduling_duration_seconds",
        "karpenter_nodepools_usage",
        "karpenter_nodepools_cost_total",
    ):
        assert f"| `{name}` |" in metrics


KARPENTER_METRICS = Path(__file__).with_name("karpenter_metrics.txt")


def karpenter_metric_names() -> list[str]:
    lines = KARPENTER_METRICS.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_every_karpenter_metric_is_served_or_says_why_not() -> None:
    served = {name for name, _, _ in served_metrics()}
    names = karpenter_metric_names()
    assert len(names) > 100
    missing = [name for name in names if name not in served and name not in NOT_SERVED]
    assert missing == [], "serve these, or add each to NOT_SERVED with the reason"
    both = sorted(served & set(NOT_SERVED))
    assert both == [], "NOT_SERVED names a metric karpy serves"
    stray = sorted(set(NOT_SERVED) - set(names))
    assert stray == [], "NOT_SERVED names a metric Karpenter does not have"
    doc = render_metrics()
    for name in names:
        assert f"| `{name}` |" in doc


def test_karpy_names_only_what_karpenter_does_not_have() -> None:
    """A `karpy_*` metric must not repeat one of Karpenter's under karpy's prefix."""
    karpenter = set(karpenter_metric_names())
    repeated = [
        name
        for name, _, _ in served_metrics()
        if name.startswith("karpy_") and f"karpenter_{name.removeprefix('karpy_')}" in karpenter
    ]
    assert repeated == []


DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "karpy-dashboard.json"
PREFIXES = ("karpenter_", "karpy_", "operator_", "controller_runtime_", "workqueue_", "leader_")


def test_the_dashboard_reads_only_metrics_karpy_serves() -> None:
    exprs = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    served = {name for name, _, _ in served_metrics()}
    named = {
        token if token in served else re.sub(r"_(bucket|count|sum)$", "", token)
        for expr in exprs
        for token in re.findall(r"[a-z][a-z0-9_]*", expr)
        if token.startswith(PREFIXES)
    }
    assert len(named) > 30
    assert sorted(named - served) == []
