"""The disruption fault suite on the AWS path, short and fixed: karpy run with `--provider aws`
against moto (the kubelet bridge registering a Node for every instance moto runs), SIGKILLed
once in the middle of each of a drift roll, an expiration under a terminationGracePeriod and a
termination mid-drain, under a PodDisruptionBudget. The trials are
kwok's (`tests/support/disruptfaults.py`, `tests/e2e/test_disruption_faults.py`) with the
emulator's EC2NodeClass, and the instances they count are moto's: after the restart no
instance may be left that no NodeClaim owns, and none launched twice for one NodeClaim.
`benchmarks/faults.py --provider aws --scenario drift|consolidation|expiration|termination`
runs twenty random moments of each and prints the table docs/reliability.md quotes.

The fleets are the smallest that show each disruption (two nodes drift, two nodes and the
do-not-disrupt pod's expire, two of four are deleted by hand). Multi-node consolidation is
swept by the benchmark only: its search needs eight such nodes to find a cheaper set, and a
trial waits out its validation and a quiet spell after it, minutes of the suite's time on
AWS (kwok's suite runs it, `tests/e2e/test_disruption_faults.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from tests.e2e.test_aws_walkthrough import emulator  # noqa: F401 - the fixture
from tests.support.awsworld import world
from tests.support.disruptfaults import DisruptionTrial, Scenario, assert_kept, killed, table
from tests.support.faults import Setup

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    pytest.mark.aws,
    # moto, the bridge and a karpy process through a whole disruption, a kill, a restart and
    # the fleet's teardown: minutes on a loaded machine.
    pytest.mark.timeout(600),
]

SETTLE_LIMIT = 300.0
"""Seconds a trial may take to settle after its kill (the sweep allows 420)."""
KILL_AT = {"drift": 8.0, "expiration": 10.0, "termination": 2.0}
"""Seconds into each disruption: inside it on this machine (see the module docstring)."""


@pytest.fixture
async def aws_setup(
    cluster_info: ClusterInfo,
    namespace: str,
    tmp_path: Path,
    emulator: Emulator,  # noqa: F811
) -> AsyncIterator[Setup]:
    async with world(emulator) as fields:
        yield Setup(
            kubeconfig=cluster_info.kubeconfig,
            namespace=namespace,
            name=namespace[-12:].strip("-"),
            log_dir=tmp_path,
            **fields,
        )


async def _kill(setup: Setup, scenario: Scenario, at: float) -> DisruptionTrial:
    return await killed(setup.kubeconfig, setup, scenario, at=at, settle_limit=SETTLE_LIMIT)


async def test_a_crash_mid_drift_roll_on_aws_finishes_it_replacement_first(
    aws_setup: Setup,
) -> None:
    scenario = Scenario(kind="drift", nodes=2)
    trial = await _kill(aws_setup, scenario, at=KILL_AT["drift"])
    assert_kept(trial)
    assert trial.nodes == scenario.nodes, table([trial])


async def test_a_crash_mid_expiration_on_aws_keeps_the_grace_period(aws_setup: Setup) -> None:
    # The PDB is not checked: the grace period's end may override it by design.
    scenario = Scenario(kind="expiration", nodes=2)
    trial = await _kill(aws_setup, scenario, at=KILL_AT["expiration"])
    assert_kept(trial, pdb=False)
    assert trial.nodes == scenario.nodes + 1, table([trial])
    assert trial.keeper_out is not None, table([trial])


async def test_a_crash_mid_drain_on_aws_finishes_the_termination(aws_setup: Setup) -> None:
    scenario = Scenario(kind="termination", nodes=4)
    trial = await _kill(aws_setup, scenario, at=KILL_AT["termination"])
    assert_kept(trial)
    assert trial.nodes == scenario.nodes, table([trial])
