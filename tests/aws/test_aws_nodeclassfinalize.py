"""What a NodeClass leaves behind when it is deleted: its launch templates and the instance
profile karpy made for its role."""

from __future__ import annotations

import pytest

from karpy.runtime.clock import FakeClock
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.session import AWSSession

from .conftest import (
    REGION,
    Moto,
    ProviderKit,
    boto_client,
    make_nodeclaim,
    node_role,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws


async def test_a_nodeclasss_templates_are_deleted_and_no_others(
    kit: ProviderKit, session: AWSSession, moto: Moto
) -> None:
    kit.nodeclasses.put(ready_nodeclass(moto, name="other"))
    await kit.provider.create(make_nodeclaim(name="mine"))
    await kit.provider.create(make_nodeclaim(name="theirs", nodeclass="other"))
    templates = LaunchTemplates(await session.client("ec2"), kit.clock)
    deleted = await templates.delete_for_nodeclass(kit.cluster.name, "default")
    assert deleted
    remaining = await templates.hydrate(kit.cluster.name)
    assert remaining >= 1  # the other NodeClass's templates stay
    assert await templates.delete_for_nodeclass(kit.cluster.name, "default") == ()
    assert await templates.delete_for_nodeclass(kit.cluster.name, "other")
    assert await templates.hydrate(kit.cluster.name) == 0


async def test_the_profile_made_for_a_role_is_deleted(session: AWSSession, moto: Moto) -> None:
    iam = boto_client(moto, "iam")
    role = node_role(moto)
    profiles = InstanceProfiles(
        await session.client("iam"), FakeClock(), cluster_name="c-final", region=REGION
    )
    name = await profiles.ensure_for_role(nodeclass="default", role=role)
    assert await profiles.delete_for_role(nodeclass="default", role=role)
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_instance_profile(InstanceProfileName=name)
    assert iam.get_role(RoleName=role)["Role"]["RoleName"] == role  # the role itself stays
    assert not await profiles.delete_for_role(nodeclass="default", role=role)
