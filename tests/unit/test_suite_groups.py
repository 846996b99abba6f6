"""The suite's xdist groups hold: every test of a group runs on one worker, one after another.

scripts/check spreads the suite over three workers with ``--dist loadgroup`` and keeps the
heaviest tests in two chains (tests/support/marks.py), so that at most two of them run at
once. That rests on pytest-xdist tagging each grouped test's node id with its group — which
pytest 9.2 silently broke for pytest-xdist 3.8 (it no longer reads the attribute xdist sets):
every group was spread over every worker and nothing failed, only the heavy tests ran three at
a time. This runs a small suite through the same options and reads back where each test ran,
so a version of either that breaks the grouping again fails here instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.support.marks import CHAIN_A, CHAIN_B

_TESTS = """
import os
import time
import pytest

pytestmark = [pytest.mark.xdist_group({group!r})]

@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.05)
    with open({record!r}, "a") as out:
        out.write(f"{group} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
"""

_LOOSE = """
import time
import pytest

@pytest.mark.parametrize("i", range(8))
def test_loose(i):
    time.sleep(0.05)
"""


def test_each_chain_runs_on_one_worker(tmp_path: Path) -> None:
    record = tmp_path / "ran.txt"
    groups = [mark.args[0] for mark in (CHAIN_A.mark, CHAIN_B.mark)]
    for index, group in enumerate(groups):
        (tmp_path / f"test_chain_{index}.py").write_text(
            _TESTS.format(group=group, record=str(record))
        )
    (tmp_path / "test_loose.py").write_text(_LOOSE)
    (tmp_path / "empty.ini").write_text("[pytest]\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "--no-loadscope-reorder",
            "-c",
            str(tmp_path / "empty.ini"),
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: defaultdict[str, set[str]] = defaultdict(set)
    for line in record.read_text().splitlines():
        group, worker = line.split()
        workers[group].add(worker)
    assert sorted(workers) == sorted(groups)
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
