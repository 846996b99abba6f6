"""The AWS path of the fault trials: what `tests/support/faults.py`'s `Setup` needs from a running
emulator (moto and the kubelet bridge), and moto's own count of the cluster's instances.

The crash and outage trials and the disruption trials compare NodeClaims with instances; on
kwok an instance is a Node, on AWS it is what moto says is pending or running under the
cluster's ownership tag, read with a client of the trial's own (never through karpy). The
benchmark starts an emulator of its own (`started`); a test can enter `world` on the
`emulator` fixture of `tests/e2e/test_aws_walkthrough.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import botocore.session

from karpy.apis.v1 import labels as wk
from karpy.operator.demo_aws import Emulator, emulator
from karpy_aws.apis import labels as awslabels

LIVE: Final = ("pending", "running")
DESCRIBE_TIMEOUT: Final = 60.0
"""Seconds one DescribeInstances may take (moto on a loaded machine is slow, never stuck)."""


class Instances:
    """The cluster's pending or running instances, as moto reports them, each as (providerID,
    the NodeClaim named by its `karpenter.sh/nodeclaim` tag, or None), on
    a client of the trial's own; `close` it before the emulator stops (moto's server waits for
    the open connections of its clients when it shuts down)."""

    def __init__(self, em: Emulator) -> None:
        environment = em.environment()
        self._ec2 = botocore.session.get_session().create_client(
            "ec2",
            region_name=em.ready["region"],
            endpoint_url=em.ready["endpoint"],
            aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=environment["AWS_SESSION_TOKEN"],
        )
        self._filters = [
            {"Name": f"tag:kubernetes.io/cluster/{em.cluster_name}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": list(LIVE)},
        ]

    async def __call__(self) -> list[tuple[str, str | None]]:
        async with asyncio.timeout(DESCRIBE_TIMEOUT):
            answer = await asyncio.to_thread(self._ec2.describe_instances, Filters=self._filters)
        found: list[tuple[str, str | None]] = []
        for reservation in answer["Reservations"]:
            for i in reservation["Instances"]:
                tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                provider_id = f"aws:///{i['Placement']['AvailabilityZone']}/{i['InstanceId']}"
                found.append((provider_id, tags.get(awslabels.TAG_NODECLAIM)))
        return found

    def close(self) -> None:
        self._ec2.close()


async def _drain(em: Emulator) -> None:
    """Read the bridge's reports, so its pipe never fills."""
    async for _ in em.events():
        pass


@contextlib.asynccontextmanager
async def world(em: Emulator) -> AsyncIterator[dict[str, Any]]:
    """`Setup` fields for the AWS path (provider, flags, environment, NodeClass, instances),
    with the bridge's reports read meanwhile. The NodeClass is renamed by `Setup`.

    The reader is a plain task, not a TaskGroup's: a test fixture may enter and leave this in
    different tasks."""
    drain = asyncio.create_task(_drain(em))
    live = Instances(em)
    try:
        yield {
            "provider": "aws",
            "flags": em.flags(),
            "environment": em.environment(),
            "nodeclass": em.nodeclass(em.cluster_name),
            "instances": live,
        }
    finally:
        live.close()
        drain.cancel()
        await asyncio.wait([drain])


@contextlib.asynccontextmanager
async def started(kubeconfig: Path, log_dir: Path, name: str) -> AsyncIterator[dict[str, Any]]:
    """An emulator of its own for cluster `name` (its log in `log_dir`), entered as `world`."""
    with (log_dir / "emulator.log").open("w") as log:
        async with (
            emulator(kubeconfig=kubeconfig, cluster_name=name, log=log) as em,
            world(em) as fields,
        ):
            yield fields


def ec2_nodepool(
    name: str,
    *,
    nodeclass: str,
    intent: str,
    requirements: Mapping[str, Sequence[str]],
    disruption: Mapping[str, Any],
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool on EC2NodeClass `nodeclass`, its nodes labelled
    ``intent=<intent>``, each requirement an ``In`` over the values given."""
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": intent}},
                "spec": {
                    "requirements": [
                        {"key": key, "operator": "In", "values": list(values)}
                        for key, values in requirements.items()
                    ],
                    "nodeClassRef": {
                        "group": awslabels.AWS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": nodeclass,
                    },
                },
            },
            "disruption": dict(disruption),
        },
    }
