"""The fault suite, short and fixed-seed: karpy SIGKILLed mid scale-out, and kube-apiserver
stopped mid scale-out, on kwok. `benchmarks/faults.py` runs the long randomized sweep (and the
AWS path) and prints the table docs/reliability.md quotes.

After a crash the restarted karpy must not launch again for pods that NodeClaims already cover
(cluster state is not synced while a launch is unresolved, and launching NodeClaims count as
capacity), must launch no second instance for a NodeClaim whose launch the crash interrupted,
must leave no instance without a NodeClaim once garbage collection had its chance, and must get
every pod running. Through an apiserver outage no node may be disrupted while pods are still on
their way to it.

The outage trial stops an apiserver, so it runs on a control plane of its own: the session's is
shared by every later test of the worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from karpy.apis.crds import all_crds, render_crd
from karpy.kube.client import KubeClient
from karpy.kube.install import install_crds
from karpy.localcluster import ClusterInfo, LocalCluster, PortInUseError
from tests.support.faults import Setup, crash_trial, outage_trial, table
from tests.support.marks import CHAIN_A

log = logging.getLogger(__name__)

pytestmark = CHAIN_A  # karpy processes of their own; the outage, a control plane too

KILL_MOMENTS = (1.5, 3.0, 4.0, 6.0)
"""Seconds after the scale-up: while NodeClaims are being created, while they launch, and
while they register."""


def _setup(kubeconfig: Path, namespace: str, tmp_path: Path, *, pods: int) -> Setup:
    return Setup(
        kubeconfig=kubeconfig,
        namespace=namespace,
        name=namespace[-12:].strip("-"),
        pods=pods,
        log_dir=tmp_path,
    )


@pytest.mark.usefixtures("karpy_crds")
async def test_a_crash_mid_scale_out_wastes_nothing_and_leaks_nothing(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    setup = _setup(cluster_info.kubeconfig, namespace, tmp_path, pods=50)
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
    for trial in trials:
        assert trial.pending == 0, table([trial])
        assert trial.nodeclaims_seen <= free.nodeclaims + 1, table([free, trial])
        assert trial.duplicates == 0, table([trial])
        assert trial.leaks == 0, table([trial])
        assert trial.deleted_before_running == 0, table([trial])
        assert trial.duplicate_log_lines == 0, table([trial])


@pytest.fixture
def own_cluster(
    tmp_path_factory: pytest.TempPathFactory, local_cluster: LocalCluster
) -> Iterator[LocalCluster]:
    """A control plane for this test alone (the session's `local_cluster` is only asked for so
    that the binaries are built once); its processes die with the test."""
    del local_cluster
    cluster = LocalCluster(
        f"faults-{os.getpid()}",
        state_dir=tmp_path_factory.mktemp("faults-cluster") / "state",
        detach=False,
    )
    for attempt in range(3):
        try:
            cluster.up()
            break
        except PortInUseError:
            if attempt == 2:
                raise
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
async def own_client(own_cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    info = own_cluster.info()
    assert info is not None
    client = await KubeClient.connect(info.kubeconfig, request_timeout=10.0)
    try:
        async with asyncio.timeout(120):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
        yield client
    finally:
        await client.close()


async def test_an_apiserver_outage_mid_scale_out_disrupts_no_node_pods_are_headed_for(
    own_cluster: LocalCluster, own_client: KubeClient, tmp_path: Path
) -> None:
    info = own_cluster.info()
    assert info is not None
    setup = _setup(info.kubeconfig, "default", tmp_path, pods=100)
    free = await crash_trial(own_client, setup, kill_after=None, label="outage-free")
    trial = await outage_trial(
        own_client, setup, own_cluster, stop_after=3.0, outage=20.0, label="outage 20s"
    )
    log.info("fault trials\n%s", table([free, trial]))
    assert free.pending == 0, table([free])
    assert trial.pending == 0, table([trial])
    assert trial.deleted_before_running == 0, table([trial])
    assert trial.nodeclaims_seen <= free.nodeclaims + 1, table([free, trial])
    assert trial.duplicates == 0, table([trial])
    assert trial.leaks == 0, table([trial])
