"""The disruption fault suite, short and fixed: karpy SIGKILLed once in the middle of each of a
drift roll, a multi-node consolidation, an expiration under a terminationGracePeriod and a
termination mid-drain, on kwok under a PodDisruptionBudget (tests/support/disruptfaults.py says
what each samples). `benchmarks/faults.py --scenario drift|consolidation|expiration|termination`
runs twenty random moments of each and prints the table docs/reliability.md quotes.

After the restart the command the killed process left must be finished or rolled back: no
`karpenter.sh/disrupted` taint and no command annotation left that nothing acts on, no NodeClaim
deleted before its replacement was Initialized, never fewer Ready pods than the PDB allows, no
Node that no NodeClaim owns, and the fleet the scenario ends with undisturbed. Sizes are small
and each scenario has one kill, at a moment inside the disruption on this machine: the four
took 37-129 s each (about five minutes in all) at a load average of 45, under two minutes of
wall time spread over the suite's three workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.localcluster import ClusterInfo
from tests.support.disruptfaults import DisruptionTrial, Scenario, assert_kept, killed, table
from tests.support.faults import Setup

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    # Each test runs a karpy process through a whole disruption, a kill and a restart, and
    # tears the fleet down: minutes on a loaded machine, beyond the suite's 300 s default.
    pytest.mark.timeout(600),
]

SETTLE_LIMIT = 300.0
"""Seconds a trial may take to settle after its kill (the sweep allows 420)."""


async def _kill(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path, scenario: Scenario, at: float
) -> DisruptionTrial:
    setup = Setup(
        kubeconfig=cluster_info.kubeconfig,
        namespace=namespace,
        name=namespace[-12:].strip("-"),
        log_dir=tmp_path,
    )
    return await killed(cluster_info.kubeconfig, setup, scenario, at=at, settle_limit=SETTLE_LIMIT)


async def test_a_crash_mid_drift_roll_finishes_it_replacement_first(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    # Three nodes drift one command at a time (about 8 s each): 9 s is the second command.
    scenario = Scenario(kind="drift", nodes=3)
    trial = await _kill(cluster_info, namespace, tmp_path, scenario, at=9.0)
    assert_kept(trial)
    assert trial.nodes == scenario.nodes, table([trial])


async def test_a_crash_mid_consolidation_leaves_a_consolidated_fleet(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    # Ten c5.large nodes, a pod of 1200m each: multi-node consolidation's search finds six of
    # them to replace with one c5.2xlarge (room for six, at four c5.large's price), leaving
    # five nodes (the crash-free sweep's end). With fewer than nine its binary search, as
    # Karpenter's, first tries a set whose replacement only ties on price and looks no
    # further. 20 s is after the first pass decided and while its command validates.
    scenario = Scenario(kind="consolidation", nodes=10)
    trial = await _kill(cluster_info, namespace, tmp_path, scenario, at=20.0)
    assert_kept(trial)
    assert abs(trial.nodes - 5) <= 1, table([trial])


async def test_a_crash_mid_expiration_keeps_the_grace_period(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    # Three nodes and a do-not-disrupt pod's node expire at once; the kill comes while the
    # do-not-disrupt pod waits out the 30 s terminationGracePeriod. The PDB is not checked:
    # the grace period's end may override it by design.
    scenario = Scenario(kind="expiration", nodes=3)
    trial = await _kill(cluster_info, namespace, tmp_path, scenario, at=10.0)
    assert_kept(trial, pdb=False)
    assert trial.nodes == scenario.nodes + 1, table([trial])
    assert trial.keeper_out is not None, table([trial])


async def test_a_crash_mid_drain_finishes_the_termination(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    # Two of four NodeClaims deleted by hand drain one pod at a time through the PDB.
    scenario = Scenario(kind="termination", nodes=4)
    trial = await _kill(cluster_info, namespace, tmp_path, scenario, at=2.0)
    assert_kept(trial)
    assert trial.nodes == scenario.nodes, table([trial])
