"""The fault suite, short and fixed-seed: karpy SIGKILLed mid scale-out, and kube-apiserver
stopped mid scale-out, on kwok. `benchmarks/faults.py` runs the long randomized sweep (and the
AWS path) and prints the table docs/reliability.md quotes.

After a crash the restarted karpy must not launch again for pods that NodeClaims already cover
(cluster state is not synced while a launch is unresolved, and launching NodeClaims count as
capacity), must leave no instance without a NodeClaim, and must get every pod running. Through
an apiserver outage no node may be disrupted while pods are still on their way to it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo, LocalCluster
from tests.support.faults import Setup, crash_trial, outage_trial, table
from tests.support.marks import ONE_AT_A_TIME

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.usefixtures("karpy_crds"), ONE_AT_A_TIME]

KILL_MOMENTS = (1.5, 4.0)
"""Seconds after the scale-up: while NodeClaims are being created, and while they launch."""


def _setup(info: ClusterInfo, namespace: str, tmp_path: Path, *, pods: int) -> Setup:
    return Setup(
        kubeconfig=info.kubeconfig,
        namespace=namespace,
        name=namespace[-12:].strip("-"),
        pods=pods,
        log_dir=tmp_path,
    )


async def test_a_crash_mid_scale_out_wastes_nothing_and_leaks_nothing(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    setup = _setup(cluster_info, namespace, tmp_path, pods=50)
    client = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        free = await crash_trial(client, setup, kill_after=None, label="crash-free")
        trials = [free]
        for moment in KILL_MOMENTS:
            trials.append(
                await crash_trial(client, setup, kill_after=moment, label=f"kill at {moment}s")
            )
    finally:
        await client.close()
    log.info("fault trials\n%s", table(trials))
    assert free.pending == 0
    for trial in trials:
        assert trial.pending == 0, table([trial])
        assert trial.nodeclaims_seen <= free.nodeclaims + 1, table([free, trial])
        assert trial.duplicates == 0, table([trial])
        assert trial.leaks == 0, table([trial])
        assert trial.duplicate_log_lines == 0, table([trial])


async def test_an_apiserver_outage_mid_scale_out_disrupts_no_node_pods_are_headed_for(
    local_cluster: LocalCluster, cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    setup = _setup(cluster_info, namespace, tmp_path, pods=100)
    client = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        trial = await outage_trial(
            client,
            setup,
            stop_apiserver=lambda: local_cluster.stop_component("kube-apiserver"),
            start_apiserver=lambda: local_cluster.start_component("kube-apiserver"),
            stop_after=3.0,
            outage=20.0,
            label="outage 20s",
        )
    finally:
        await client.close()
    log.info("fault trials\n%s", table([trial]))
    assert trial.pending == 0, table([trial])
    assert trial.deleted_before_running == 0, table([trial])
    assert trial.leaks == 0, table([trial])
