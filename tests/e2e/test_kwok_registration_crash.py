"""karpy SIGKILLed while kwok launches wait out a registration delay, on kwok.

With a registration delay the kwok provider holds a launch in memory until its Node is due; a
crash used to lose every launch still waiting, so their NodeClaims waited for Nodes that never
came until garbage collection deleted them and the provisioner launched again. The NodeClaims
record those launches, and the restarted process holds them again: no NodeClaim is deleted
while pods wait, none is launched twice, and the fleet is the crash-free one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo
from karpy_kwok.apis import labels as kwoklabels
from tests.support.faults import Setup, crash_trial, table
from tests.support.marks import CHAIN_B

log = logging.getLogger(__name__)

pytestmark = [CHAIN_B, pytest.mark.usefixtures("karpy_crds")]

REGISTRATION_DELAY = "10s"
KILL_AFTER = 5.0
"""Seconds after the scale-up: the NodeClaims have launched, and their Nodes are not due yet."""


async def test_a_crash_while_launches_wait_for_their_node_loses_none(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    name = namespace[-12:].strip("-")
    setup = Setup(
        kubeconfig=cluster_info.kubeconfig,
        namespace=namespace,
        name=name,
        pods=20,
        log_dir=tmp_path,
        nodeclass={
            "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "spec": {"nodeRegistrationDelay": REGISTRATION_DELAY},
        },
    )
    client = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        free = await crash_trial(client, setup, kill_after=None, label="crash-free")
        trial = await crash_trial(client, setup, kill_after=KILL_AFTER, label="kill waiting")
    finally:
        await client.close()
    log.info("fault trials\n%s", table([free, trial]))
    # The kill fell while launches waited: the restarted process held them again.
    restarted = tmp_path / "karpy-kill-waiting-2.log"
    resumed = [
        entry
        for line in restarted.read_bytes().splitlines()
        if line.startswith(b"{")
        and (entry := orjson.loads(line)).get("message") == "resumed pending kwok launch"
    ]
    assert resumed, f"no launch was waiting at the kill; see {restarted}"
    assert free.pending == 0, table([free])
    assert trial.pending == 0, table([trial])
    assert trial.deleted_before_running == 0, table([trial])
    assert trial.nodeclaims_seen <= free.nodeclaims + 1, table([free, trial])
    assert trial.duplicates == 0, table([trial])
    assert trial.leaks == 0, table([trial])
