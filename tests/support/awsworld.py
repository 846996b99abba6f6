"""The AWS path of the fault trials: what `tests/support/faults.py`'s `Setup` needs from a running
emulator (moto and the kubelet bridge), and moto's own count of the cluster's instances.

The crash and outage trials and the disruption trials compare NodeClaims with instances; on
kwok an instance is a Node, on AWS it is what moto says is pending or running under the
cluster's ownership tag, read with a client of the trial's own (never through karpy). The
benchmark starts an emulator of its own (`started`); the suite's tests use the `emulator`
fixture of `tests/e2e/test_aws_walkthrough.py` and enter `world` on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import botocore.session

from karpy.operator.demo_aws import Emulator, emulator

LIVE: Final = ("pending", "running")
DESCRIBE_TIMEOUT: Final = 60.0
"""Seconds one DescribeInstances may take (moto on a loaded machine is slow, never stuck)."""


def instances(em: Emulator) -> Callable[[], Awaitable[list[str]]]:
    """An async callable: the providerIDs of the cluster's pending or running instances."""
    environment = em.environment()
    ec2 = botocore.session.get_session().create_client(
        "ec2",
        region_name=em.ready["region"],
        endpoint_url=em.ready["endpoint"],
        aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=environment["AWS_SESSION_TOKEN"],
    )
    owned = {"Name": f"tag:kubernetes.io/cluster/{em.cluster_name}", "Values": ["owned"]}

    async def live() -> list[str]:
        async with asyncio.timeout(DESCRIBE_TIMEOUT):
            answer = await asyncio.to_thread(
                ec2.describe_instances,
                Filters=[owned, {"Name": "instance-state-name", "Values": list(LIVE)}],
            )
        return [
            f"aws:///{i['Placement']['AvailabilityZone']}/{i['InstanceId']}"
            for r in answer["Reservations"]
            for i in r["Instances"]
        ]

    return live


async def _drain(em: Emulator) -> None:
    """Read the bridge's reports, so its pipe never fills."""
    async for _ in em.events():
        pass


@contextlib.asynccontextmanager
async def world(em: Emulator) -> AsyncIterator[dict[str, Any]]:
    """`Setup` fields for the AWS path (provider, flags, environment, NodeClass, instances),
    with the bridge's reports read meanwhile. The NodeClass is renamed by `Setup`."""
    async with asyncio.TaskGroup() as group:
        drain = group.create_task(_drain(em))
        try:
            yield {
                "provider": "aws",
                "flags": em.flags(),
                "environment": em.environment(),
                "nodeclass": em.nodeclass(em.cluster_name),
                "instances": instances(em),
            }
        finally:
            drain.cancel()


@contextlib.asynccontextmanager
async def started(kubeconfig: Path, log_dir: Path, name: str) -> AsyncIterator[dict[str, Any]]:
    """An emulator of its own for cluster `name` (its log in `log_dir`), entered as `world`."""
    with (log_dir / "emulator.log").open("w") as log:
        async with (
            emulator(kubeconfig=kubeconfig, cluster_name=name, log=log) as em,
            world(em) as fields,
        ):
            yield fields
