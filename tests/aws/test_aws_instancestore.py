"""instanceStorePolicy: RAID0 on moto: the launch template's user data asks each AMI family's
bootstrap for a RAID0 array of the instance-store disks, and a type with instance storage
offers that array's size as ephemeral storage (types without keep their EBS volume's)."""

from __future__ import annotations

import base64
import tomllib
from typing import Any

import pytest
import yaml

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.core.resources import EPHEMERAL_STORAGE, parse_quantity
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import labels as awslabels
from karpy_aws.session import AWSSession

from .conftest import (
    AMI_IDS,
    SPOT_PRICES,
    FaultInjector,
    Moto,
    ProviderKit,
    build_kit,
    make_nodeclaim,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws

LOCAL = "m5d.large"  # one 75 GB NVMe instance-store disk
RAID0 = nc.InstanceStorePolicy.RAID0


@pytest.fixture
async def store_kit(session: AWSSession, faults: FaultInjector, moto: Moto) -> ProviderKit:
    return await build_kit(session, faults, moto, spot_prices={**SPOT_PRICES, LOCAL: 0.03})


def _pool() -> NodePool:
    ref = NodeClassReference(group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default")
    return NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(requirements=(), node_class_ref=ref)
            )
        ),
    )


async def _user_data(kit: ProviderKit) -> str:
    """Launch a NodeClaim pinned to the local-disk type; its template's user data."""
    await kit.provider.create(make_nodeclaim((wk.LABEL_INSTANCE_TYPE, "In", (LOCAL,))))
    name = kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"
    ]["LaunchTemplateName"]
    data = kit.ec2().describe_launch_template_versions(LaunchTemplateName=name)
    encoded = data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    return base64.b64decode(encoded).decode()


def _mime_part(user_data: str, content_type: str) -> str:
    parts = user_data.split("--//")
    (part,) = (p for p in parts if f"Content-Type: {content_type}" in p)
    return part.split("\n\n", 1)[1]


async def test_raid0_sizes_ephemeral_storage_from_the_instance_store(
    store_kit: ProviderKit,
) -> None:
    store_kit.nodeclasses.put(ready_nodeclass(store_kit.moto, instance_store_policy=RAID0))
    by_name = {t.name: t for t in await store_kit.provider.get_instance_types(_pool())}
    assert by_name[LOCAL].capacity[EPHEMERAL_STORAGE] == parse_quantity("75G")
    # No local disk: the EBS volume's size, as without the policy.
    assert by_name["m5.large"].capacity[EPHEMERAL_STORAGE] == parse_quantity("20Gi")
    store_kit.nodeclasses.put(ready_nodeclass(store_kit.moto))
    plain = {t.name: t for t in await store_kit.provider.get_instance_types(_pool())}
    assert plain[LOCAL].capacity[EPHEMERAL_STORAGE] == parse_quantity("20Gi")


async def test_al2023_asks_nodeadm_for_a_raid0_array(store_kit: ProviderKit) -> None:
    store_kit.nodeclasses.put(ready_nodeclass(store_kit.moto, instance_store_policy=RAID0))
    config = yaml.safe_load(_mime_part(await _user_data(store_kit), "application/node.eks.aws"))
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


async def test_al2_asks_bootstrap_sh_for_a_raid0_array(store_kit: ProviderKit) -> None:
    store_kit.nodeclasses.put(
        ready_nodeclass(
            store_kit.moto,
            instance_store_policy=RAID0,
            ami_selector_terms=(nc.AMISelectorTerm(alias="al2@latest"),),
        )
    )
    script = _mime_part(await _user_data(store_kit), "text/x-shellscript")
    assert "--local-disks raid0" in script
    assert script.index("--local-disks raid0") < script.index("--kubelet-extra-args")


async def test_bottlerocket_binds_its_ephemeral_dirs_to_the_array(store_kit: ProviderKit) -> None:
    store_kit.nodeclasses.put(
        ready_nodeclass(
            store_kit.moto,
            instance_store_policy=RAID0,
            ami_selector_terms=(nc.AMISelectorTerm(alias="bottlerocket@latest"),),
        )
    )
    settings: dict[str, Any] = tomllib.loads(await _user_data(store_kit))["settings"]
    command = settings["bootstrap-commands"]["000-mount-instance-storage"]
    assert command == {
        "commands": [
            ["apiclient", "ephemeral-storage", "init"],
            [
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ],
        ],
        "mode": "always",
        "essential": True,
    }


async def test_custom_user_data_is_left_as_written(store_kit: ProviderKit) -> None:
    custom = "#!/bin/bash\necho my own bootstrap\n"
    store_kit.nodeclasses.put(
        ready_nodeclass(
            store_kit.moto,
            instance_store_policy=RAID0,
            ami_family=nc.AMIFamily.CUSTOM,
            ami_selector_terms=(nc.AMISelectorTerm(id=AMI_IDS["al2023x86new"]),),
            user_data=custom,
        )
    )
    assert await _user_data(store_kit) == custom


async def test_without_the_policy_nothing_is_asked(store_kit: ProviderKit) -> None:
    user_data = await _user_data(store_kit)
    assert "localStorage" not in user_data
    assert "RAID0" not in user_data
