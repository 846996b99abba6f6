"""Every connection karpy holds to the apiserver reset in the middle of a drain, short and fixed:
the suite's version of `benchmarks/faults.py --fault watchcut` (tests/support/watchcut.py and
tests/support/disruptfaults.py say what is cut and what is sampled).

karpy reaches the worker's apiserver through a proxy that resets every connection two seconds
into a termination of two of four nodes under a PodDisruptionBudget: the watch streams break and
relist, and whatever write of the drain was on the wire fails after it may have landed. The
drain must still finish as a fault-free one does: no NodeClaim deleted before its replacement
was Initialized, never fewer Ready pods than the PDB allows, no disrupted taint or command
annotation left, no Node without a NodeClaim, the fleet at its size; and karpy's own counters
must show the streams broke and were listed again. An expired resourceVersion (410 Gone) needs
an apiserver without a watch cache, so only the sweep (a control plane of its own) forces it;
`tests/cluster/runtime/test_watch.py` covers the relist on 410 itself.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo
from tests.support.disruptfaults import Scenario, disruption_trial, table
from tests.support.faults import Setup
from tests.support.watchcut import watch_cut

log = logging.getLogger(__name__)

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    # A karpy process through a whole drain and its teardown: minutes on a loaded machine.
    pytest.mark.timeout(600),
]


async def test_connections_reset_mid_drain_leave_the_termination_finished(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    scenario = Scenario(kind="termination", nodes=4)
    setup = Setup(
        kubeconfig=cluster_info.kubeconfig,
        namespace=namespace,
        name=namespace[-12:].strip("-"),
        log_dir=tmp_path,
    )
    client = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        async with watch_cut(cluster_info.kubeconfig, tmp_path, mode="drop") as cut:
            trial = await disruption_trial(
                client,
                setup,
                scenario,
                label="termination: connections reset at 2.0s",
                cut_at=2.0,
                cut=cut,
                settle_limit=300.0,
            )
            opened = cut.proxy.opened
    finally:
        await client.close()
    log.info("watch cut trial\n%s", table([trial]))
    assert trial.settled, table([trial])
    assert trial.early == 0, table([trial])
    assert not trial.pdb_broken, table([trial])
    assert (trial.stale_taints, trial.stale_annotations) == (0, 0), table([trial])
    assert (trial.duplicates, trial.leaks) == (0, 0), table([trial])
    assert trial.nodes == scenario.nodes, table([trial])
    # The cut reached karpy: its streams broke, and each kind was listed again.
    assert trial.watch_errors > 0, table([trial])
    assert trial.relists > 0, table([trial])
    assert opened > 1, opened
