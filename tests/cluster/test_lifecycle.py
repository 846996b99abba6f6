"""`karpy cluster up` / `down` as a user runs them: idempotent up, clean down, restartable parts."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from karpy.localcluster import LocalCluster
from karpy.localcluster.cluster import COMPONENTS
from tests.support.marks import CHAIN_B

pytestmark = CHAIN_B  # each test starts a control plane of its own


def _quiet(_: str) -> None:
    """Progress sink."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.usefixtures("local_cluster")  # binaries are built once, by the session cluster
def test_up_is_idempotent_and_down_leaves_no_process(tmp_path: Path) -> None:
    cluster = LocalCluster("lifecycle", state_dir=tmp_path / "state", progress=_quiet)
    info = cluster.up()
    try:
        assert info.server.startswith("https://127.0.0.1:")
        statuses = cluster.status()
        assert [s.name for s in statuses] == list(COMPONENTS)
        assert all(s.running for s in statuses)
        assert all((s.rss_bytes or 0) > 0 for s in statuses)
        pids = [s.pid for s in statuses]

        again = cluster.up()
        assert again == info
        assert [s.pid for s in cluster.status()] == pids

        cluster.stop_component("kube-apiserver")
        assert not next(s for s in cluster.status() if s.name == "kube-apiserver").running
        cluster.start_component("kube-apiserver")
        assert all(s.running for s in cluster.status())
        pids = [s.pid for s in cluster.status()]
    finally:
        assert cluster.down()
    assert not any(_alive(pid) for pid in pids)
    assert not (tmp_path / "state").exists()
    assert cluster.info() is None
    assert not cluster.down()


@pytest.mark.usefixtures("local_cluster")  # binaries are built once, by the session cluster
def test_the_cli_brings_a_cluster_up_and_down_as_separate_processes() -> None:
    """`karpy cluster up`, `status`, `env`, `down`, each its own process, as a user types them:
    the components outlive `up`, and nothing outlives `down`."""
    name = f"cli-{secrets.token_hex(3)}"

    def karpy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "karpy", "cluster", "--name", name, *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    up = karpy("up")
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.startswith("export KUBECONFIG=")
        status = karpy("status")
        assert status.returncode == 0, status.stdout
        lines = status.stdout.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("COMPONENT"))
        rows = [line.split() for line in lines[header + 1 :] if line.strip()]
        assert [row[0] for row in rows] == list(COMPONENTS)
        assert all(row[1] == "running" for row in rows)
        pids = [int(row[2]) for row in rows]
        assert all(_alive(pid) for pid in pids)
        assert karpy("env").stdout == up.stdout
    finally:
        down = karpy("down")
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids)
    assert karpy("status").returncode == 1
    env = karpy("env")
    assert env.returncode == 1
    assert f"cluster {name!r} is not up" in env.stderr
