"""`karpy demo`, the README's main command, as a user runs it: its own cluster, seed 000's steps
(with a short consolidateAfter), exit code 0, every step reported ok, and nothing left behind;
and ``--provider clusterapi``, on Cluster API's manager: a Machine of small claimed, then one of
large, and both removed."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from karpy.localcluster import ensure_clusterapi
from tests.support.marks import CHAIN_B


@CHAIN_B  # a control plane of its own, besides the session's
@pytest.mark.usefixtures("local_cluster")  # binaries are built once, by the session cluster
def test_karpy_demo_plays_the_walkthrough_and_exits_zero() -> None:
    name = f"demo-{secrets.token_hex(3)}"
    done = subprocess.run(
        [sys.executable, "-m", "karpy", "demo", "--name", name, "--consolidate-after", "3"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout[done.stdout.index("\nsummary\n") :]
    verdicts = [line.split()[0] for line in summary.splitlines()[2:] if line.startswith("  ")]
    assert verdicts[:4] == ["ok", "ok", "ok", "ok"], summary
    assert "launched: " in done.stdout  # a NodeClaim with its instance type, zone and price
    assert f"cluster '{name}' is down" in done.stderr + done.stdout
    status = subprocess.run(
        [sys.executable, "-m", "karpy", "cluster", "--name", name, "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "is not running" in status.stdout


# A control plane of its own, besides the session's: with the Cluster API tests, which run last,
# not in a chain of heavy tests (tests/support/marks.py).
@pytest.mark.xdist_group("clusterapi")
@pytest.mark.usefixtures("local_cluster")
@pytest.mark.tools  # last: Cluster API's manager may still be building beside the suite
@pytest.mark.timeout(1500)
def test_karpy_demo_plays_the_walkthrough_on_cluster_api_and_exits_zero() -> None:
    ensure_clusterapi()  # built (or waited for) here, so the demo's own time is its steps'
    name = f"demo-{secrets.token_hex(3)}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "karpy",
            "demo",
            "--provider",
            "clusterapi",
            "--name",
            name,
            "--consolidate-after",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout[done.stdout.index("\nsummary\n") :]
    verdicts = [line.split()[0] for line in summary.splitlines()[2:] if line.startswith("  ")]
    assert verdicts[:4] == ["ok", "ok", "ok", "ok"], summary
    assert "Cluster API v1.14.2: core manager running" in done.stdout
    machines = [
        line.split("cluster api: ", 1)[1]
        for line in done.stdout.splitlines()
        if "] cluster api: " in line
    ]
    claimed = [line.split()[3] for line in machines if "claimed by nodeclaim" in line]
    assert claimed == ["small", "large"], done.stdout  # "Machine <key> of <md> claimed ..."
    removed = [line for line in machines if line.endswith(" removed")]
    assert len(removed) == 2, done.stdout
    assert f"cluster '{name}' is down" in done.stderr + done.stdout
