"""Garbage collection of instance profiles on moto's IAM and the real local control plane: only
this cluster's profiles that no EC2NodeClass's status names, no live instance runs with, and
that are more than an hour old are deleted (their roles removed first, the roles kept)."""

from __future__ import annotations

import datetime
import secrets

import attrs
import pytest

from karpy.kube.client import KubeClient
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.controllers.instanceprofiles import InstanceProfileGC
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.session import AWSSession
from karpy_aws_emulator.world import AMI_IDS
from tests.support.providers import Informed

from .conftest import REGION, Moto, boto_client, node_role, ready_nodeclass

pytestmark = [pytest.mark.aws, pytest.mark.cluster]


async def test_only_unused_old_profiles_of_this_cluster_are_deleted(
    kube: KubeClient, session: AWSSession, moto: Moto, cleanup: list[str]
) -> None:
    iam = boto_client(moto, "iam")
    cluster = f"gc-{secrets.token_hex(4)}"
    clock = FakeClock()
    role = node_role(moto)
    mine = InstanceProfiles(await session.client("iam"), clock, cluster_name=cluster, region=REGION)
    elsewhere = InstanceProfiles(
        await session.client("iam"), clock, cluster_name=cluster, region="eu-west-1"
    )
    other_cluster = InstanceProfiles(
        await session.client("iam"), clock, cluster_name=f"{cluster}x", region=REGION
    )
    in_status = await mine.ensure_for_role(nodeclass="live", role=role)
    orphan = await mine.ensure_for_role(nodeclass="gone", role=role)
    running = await mine.ensure_for_role(nodeclass="old-role", role=role)
    other_region = await elsewhere.ensure_for_role(nodeclass="gone", role=role)
    foreign = await other_cluster.ensure_for_role(nodeclass="gone", role=role)

    nodeclass = ready_nodeclass(moto, name=f"gc-{secrets.token_hex(4)}")
    nodeclass = attrs.evolve(
        nodeclass, status=attrs.evolve(nodeclass.status, instance_profile=in_status)
    )
    cleanup.append(EC2NODECLASSES.object_path(nodeclass.metadata.name or ""))
    await kube.create(EC2NODECLASSES, nodeclass)
    await kube.patch_status(EC2NODECLASSES, nodeclass.metadata.name or "", nodeclass.status)
    boto_client(moto, "ec2").run_instances(
        ImageId=AMI_IDS["al2023x86new"],
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        SubnetId=moto.subnets["a"],
        IamInstanceProfile={"Name": running},
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
                    {"Key": "karpenter.sh/nodepool", "Value": "default"},
                ],
            }
        ],
    )
    created = iam.get_instance_profile(InstanceProfileName=orphan)["InstanceProfile"]["CreateDate"]

    telemetry = Telemetry.setup(service_name="tests")
    informed = Informed(kube, telemetry)
    informed.inform(EC2NODECLASSES)
    try:
        async with informed.running() as view:
            gc = InstanceProfileGC(
                view,
                await session.client("iam"),
                Instances(await session.client("ec2"), cluster_name=cluster),
                cluster_name=cluster,
                region=REGION,
                clock=clock,
            )
            clock.set(created + datetime.timedelta(minutes=30))
            assert await gc.collect() == ()  # all younger than an hour
            clock.set(created + datetime.timedelta(hours=2))
            assert await gc.collect() == (orphan,)
            assert await gc.collect() == ()
    finally:
        telemetry.shutdown()
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_instance_profile(InstanceProfileName=orphan)
    for kept in (in_status, running, other_region, foreign):
        assert iam.get_instance_profile(InstanceProfileName=kept)["InstanceProfile"]["Roles"]
    assert iam.get_role(RoleName=role)["Role"]["RoleName"] == role
