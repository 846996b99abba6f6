"""Golden scenarios: ``karpy simulate`` output for each tests/unit/simulate/golden/*.yaml.

Each scenario has an expected JSON plan and table next to it. After an intended change to the
solver or the rendering, regenerate them with ``KARPY_UPDATE_GOLDEN=1`` and review the diff.
A golden only says the output did not change; that the plan it shows is a valid one is for the
independent plan checker (tests/unit/core/validate.py), which every golden plan passes through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from karpy.core.buffers import solve_with_buffers
from karpy.core.scheduling.preferences import MinValuesPolicy
from karpy.simulate import render
from karpy.simulate.cli import simulate_main
from karpy.simulate.scenario import load
from tests.unit.core.validate import check

GOLDEN = Path(__file__).parent / "golden"
SCENARIOS = sorted(GOLDEN.glob("*.yaml"))
UPDATE = os.environ.get("KARPY_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
@pytest.mark.parametrize("output", ["json", "table"])
def test_simulate_matches_golden(
    scenario: Path, output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = simulate_main([str(scenario), "-o", output])
    printed = capsys.readouterr().out
    expected = scenario.with_suffix(".json" if output == "json" else ".txt")
    if UPDATE:
        expected.write_text(printed, encoding="utf-8")
    assert printed == expected.read_text(encoding="utf-8")
    plan = json.loads(scenario.with_suffix(".json").read_text(encoding="utf-8"))
    assert code == (1 if plan["summary"]["unplaced"] else 0)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_every_golden_plan_passes_the_independent_checker(scenario: Path) -> None:
    """The plan the goldens print keeps every hard constraint: each pod placed or said
    unplaceable, each NodeClaim's pods fit and tolerate it, limits, affinity and spread hold."""
    loaded = load(scenario)
    # A CapacityBuffer's chunks are pods like any other to the checker.
    pods = [*loaded.pods, *loaded.buffers]
    results = solve_with_buffers(loaded.snapshot, loaded.pods, loaded.buffers, loaded.options)
    options = loaded.options
    check(
        loaded.snapshot,
        pods,
        results,
        options.max_instance_types,
        # BestEffort lets a NodeClaim that says so (minValuesRelaxed) break minValues.
        strict_min_values=options.min_values_policy is MinValuesPolicy.STRICT,
    )
    # The plan checked is the plan the goldens show.
    golden = scenario.with_suffix(".json").read_text(encoding="utf-8")
    assert render.to_json(render.plan_dict(results, tuple(pods), loaded.overlays)) == golden
    table = scenario.with_suffix(".txt").read_text(encoding="utf-8")
    assert render.plan_table(results, tuple(pods), loaded.overlays) == table


def test_every_scenario_has_goldens() -> None:
    assert len(SCENARIOS) >= 4
    for scenario in SCENARIOS:
        assert scenario.with_suffix(".json").exists(), scenario
        assert scenario.with_suffix(".txt").exists(), scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_output_does_not_depend_on_the_hash_seed(scenario: Path) -> None:
    """Set and dict order must never leak into a plan: run under two hash seeds."""
    code = (
        "import sys; from karpy.simulate.cli import simulate_main;"
        f" sys.exit(simulate_main([{str(scenario)!r}, '-o', 'json']))"
    )
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode in (0, 1), done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
