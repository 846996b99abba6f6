"""The seeded packing's solver writes nothing to karpy's standard output (its JSON lines)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import highspy
from karpy.runtime.solverbanner import silence_solver_banner
silence_solver_banner()
highspy.Highs().setOptionValue("output_flag", False)
print("after")
"""


def test_the_solver_banner_never_reaches_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "after\n"


def test_without_it_the_banner_does_reach_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import highspy\nhighspy.Highs()\nprint('after')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "HiGHS" in done.stdout
