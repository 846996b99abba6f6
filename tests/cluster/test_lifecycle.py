"""`karpy cluster up` / `down` as a user runs them: idempotent up, clean down, restartable parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from karpy.localcluster import LocalCluster
from karpy.localcluster.cluster import COMPONENTS


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
