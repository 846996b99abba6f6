"""Golden scenarios: ``karpy simulate`` output for each tests/unit/simulate/golden/*.yaml.

Each scenario has an expected JSON plan and table next to it. After an intended change to the
solver or the rendering, regenerate them with ``KARPY_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from karpy.simulate.cli import simulate_main

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


def test_every_scenario_has_goldens() -> None:
    assert len(SCENARIOS) >= 4
    for scenario in SCENARIOS:
        assert scenario.with_suffix(".json").exists(), scenario
        assert scenario.with_suffix(".txt").exists(), scenario
