"""The kubelet-join bridge: a Node joins for every instance moto runs, and leaves when it ends.

On EC2 the instance's kubelet registers its Node, and the cloud controller manager deletes the Node
once the instance is terminated. moto runs neither, so this loop plays both: it lists the cluster's
instances with the filter the provider uses (karpy_aws.providers.instance), creates the Node each
running one's kubelet would register (:mod:`karpy_aws_emulator.join`; kwok then keeps it Ready and
runs its pods), and deletes the Nodes whose instance is shutting down or gone. Only Nodes it made
itself (annotated with the cluster's name) are ever deleted. What it sees and does is also reported
to an optional callback (``karpy demo --provider aws`` shows it): an instance starts running or
ends, a Node joins or leaves.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.kinds import NODES
from karpy_aws.providers.instance import LIVE_STATES
from karpy_aws.providers.instancetype.instancetypes import InstanceTypeInfo, parse_instance_type
from karpy_aws.providers.launchtemplate import TAG_CLUSTER_PREFIX
from karpy_aws.session import AWSClient
from karpy_aws_emulator.join import (
    Boot,
    EmulatedInstance,
    by_instance_id,
    kubelet_node,
    parse_instance,
    read_user_data,
)

log = logging.getLogger(__name__)

JOINING_STATES: Final = ("running",)
"""An instance's kubelet registers once the instance runs."""
SYNC_TIMEOUT: Final = 60.0
"""Seconds one pass (a few EC2 calls and one Node list) may take before it is abandoned."""
ENDED_STATES: Final = ("shutting-down", "terminated")

Happening = Literal["instance-running", "instance-ended", "node-joined", "node-left"]
Report = Callable[[Happening, Mapping[str, str]], None]
"""Told what happened, with its details (instance, node, instance-type, zone, capacity-type)."""


def _ignore(happening: Happening, details: Mapping[str, str]) -> None:
    del happening, details


class KubeletBridge:
    """Joins and removes the Nodes of one cluster's moto instances (see the module docstring)."""

    def __init__(
        self,
        ec2: AWSClient,
        kube: KubeClient,
        *,
        cluster_name: str,
        report: Report = _ignore,
    ) -> None:
        self._ec2 = ec2
        self._kube = kube
        self._cluster_name = cluster_name
        self._report = report
        self._states: dict[str, str] = {}
        self._boots: dict[str, Boot] = {}
        self._types: dict[str, InstanceTypeInfo] = {}

    async def run(self, *, interval: float = 1.0) -> None:
        """Sync every ``interval`` seconds until cancelled; a failed pass is logged and retried."""
        while True:
            try:
                async with asyncio.timeout(SYNC_TIMEOUT):
                    await self.sync()
            except Exception:
                log.exception("kubelet bridge pass failed")
            await asyncio.sleep(interval)

    async def sync(self) -> None:
        """One pass: join running instances that have no Node yet, remove Nodes whose instance
        is shutting down or gone."""
        instances = await self._instances()
        self._track(instances)
        listed = await self._kube.list(NODES)
        nodes = by_instance_id((i.obj for i in listed.items), cluster_name=self._cluster_name)
        for instance in instances:
            if instance.state in JOINING_STATES and instance.id not in nodes:
                await self._join(instance)
        alive = {i.id for i in instances if i.state in LIVE_STATES and i.state not in ENDED_STATES}
        for instance_id, node in sorted(nodes.items()):
            if instance_id in alive:
                continue
            self._boots.pop(instance_id, None)
            if node.metadata.deletion_timestamp is not None:
                continue
            with contextlib.suppress(NotFoundError):
                await self._kube.delete(NODES, node.metadata.name or "")
                log.info(
                    "deleted node of ended instance",
                    extra={"node": node.metadata.name, "instance": instance_id},
                )
                self._report(
                    "node-left", {"node": node.metadata.name or "", "instance": instance_id}
                )

    def _track(self, instances: Sequence[EmulatedInstance]) -> None:
        """Report instances that started running or ended since the last pass."""
        for instance in instances:
            before = self._states.get(instance.id)
            self._states[instance.id] = instance.state
            if instance.state == before or before in ENDED_STATES:
                continue
            if instance.state == "running":
                self._report("instance-running", _details(instance))
            elif instance.state in ENDED_STATES:
                self._report("instance-ended", _details(instance))

    async def _instances(self) -> Sequence[EmulatedInstance]:
        reservations = await self._ec2.paginate(
            "DescribeInstances",
            result_key="Reservations",
            Filters=[
                {"Name": "tag-key", "Values": [wk.LABEL_NODEPOOL]},
                {"Name": f"tag:{TAG_CLUSTER_PREFIX}{self._cluster_name}", "Values": ["owned"]},
            ],
        )
        return [parse_instance(i) for r in reservations for i in r.get("Instances", [])]

    async def _join(self, instance: EmulatedInstance) -> None:
        boot = self._boots.get(instance.id)
        if boot is None:
            boot = self._boots[instance.id] = read_user_data(await self._user_data(instance.id))
        node = kubelet_node(
            instance,
            await self._type(instance.instance_type),
            boot,
            region=self._ec2.region,
            cluster_name=self._cluster_name,
        )
        try:
            await self._kube.create(NODES, node)
        except ConflictError:
            log.warning(
                "node name taken, instance not joined",
                extra={"node": node.metadata.name, "instance": instance.id},
            )
            return
        log.info(
            "node joined",
            extra={
                "node": node.metadata.name,
                "instance": instance.id,
                "instance_type": instance.instance_type,
                "zone": instance.zone,
            },
        )
        self._report("node-joined", {**_details(instance), "node": node.metadata.name or ""})

    async def _user_data(self, instance_id: str) -> str:
        answer = await self._ec2.call(
            "DescribeInstanceAttribute", InstanceId=instance_id, Attribute="userData"
        )
        encoded = answer.get("UserData", {}).get("Value") or ""
        return base64.b64decode(encoded).decode() if encoded else ""

    async def _type(self, name: str) -> InstanceTypeInfo:
        info = self._types.get(name)
        if info is None:
            answer: Mapping[str, Any] = await self._ec2.call(
                "DescribeInstanceTypes", InstanceTypes=[name]
            )
            info = self._types[name] = parse_instance_type(answer["InstanceTypes"][0])
        return info


def _details(instance: EmulatedInstance) -> dict[str, str]:
    return {
        "instance": instance.id,
        "instance-type": instance.instance_type,
        "zone": instance.zone,
        "capacity-type": instance.capacity_type,
    }
