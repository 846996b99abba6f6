"""docs/settings.md and docs/metrics.md are exactly what the code that defines them renders."""

from __future__ import annotations

from karpy.runtime.reference import main, render_metrics, render_settings, stale


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
        "karpy_nodepools_cost_per_hour",
    ):
        assert f"| `{name}` |" in metrics
