"""The EC2NodeClass's launch options as EC2 receives them: each field that shapes a launch is read
back from moto's copy of the launch template, or from the CreateFleet request karpy sent (moto
ignores CreateFleet's Context, so the fault injector's record of the request is the evidence)."""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.meta import Quantity
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis.ec2nodeclass_network import ConnectionTracking, CPUOptions

from .conftest import ProviderKit, make_nodeclaim, ready_nodeclass

pytestmark = pytest.mark.aws


def _template_data(kit: ProviderKit) -> dict[str, Any]:
    """The launch template data of the last CreateFleet's first launch template, from moto."""
    name = kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"
    ]["LaunchTemplateName"]
    versions = kit.ec2().describe_launch_template_versions(LaunchTemplateName=name)
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


async def test_cpu_options_conntrack_prefixes_and_init_rate_reach_the_template(
    kit: ProviderKit,
) -> None:
    kit.nodeclasses.put(
        ready_nodeclass(
            kit.moto,
            cpu_options=CPUOptions(nested_virtualization="enabled"),
            connection_tracking=ConnectionTracking(
                tcp_established_timeout=3600, udp_stream_timeout=120, udp_timeout=30
            ),
            ip_prefix_count=2,
            associate_public_ip_address=False,
            block_device_mappings=(
                nc.BlockDeviceMapping(
                    device_name="/dev/xvda",
                    root_volume=True,
                    ebs=nc.BlockDevice(
                        volume_size=Quantity("40Gi"),
                        snapshot_id="snap-0123456789abcdef0",
                        volume_initialization_rate=200,
                    ),
                ),
            ),
        )
    )
    launched = await kit.provider.create(make_nodeclaim())
    data = _template_data(kit)
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    (primary,) = data["NetworkInterfaces"]
    assert primary["DeviceIndex"] == 0
    assert primary["Ipv4PrefixCount"] == 2
    assert primary["AssociatePublicIpAddress"] is False
    assert primary["ConnectionTrackingSpecification"] == {
        "TcpEstablishedTimeout": 3600,
        "UdpStreamTimeout": 120,
        "UdpTimeout": 30,
    }
    # With the primary interface spelled out, the groups live on it (EC2 refuses both).
    assert primary["Groups"] == [kit.moto.security_groups["nodes"]]
    assert "SecurityGroupIds" not in data
    (bdm,) = data["BlockDeviceMappings"]
    assert bdm["Ebs"]["VolumeInitializationRate"] == 200
    assert bdm["Ebs"]["SnapshotId"] == "snap-0123456789abcdef0"
    # The instance still gets the groups from the interface (what drift compares against).
    instance_id = (launched.status.provider_id or "").rsplit("/", 1)[1]
    reservation = kit.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"][0]
    groups = [g["GroupId"] for g in reservation["Instances"][0]["SecurityGroups"]]
    assert groups == [kit.moto.security_groups["nodes"]]


async def test_a_nodeclass_without_them_keeps_the_plain_template(kit: ProviderKit) -> None:
    await kit.provider.create(make_nodeclaim())
    data = _template_data(kit)
    assert "CpuOptions" not in data
    assert "NetworkInterfaces" not in data
    assert data["SecurityGroupIds"] == [kit.moto.security_groups["nodes"]]
    assert "VolumeInitializationRate" not in data["BlockDeviceMappings"][0]["Ebs"]
    assert "Context" not in kit.faults.requests["CreateFleet"][-1]


async def test_the_context_goes_with_every_create_fleet(kit: ProviderKit) -> None:
    context = f"ctx-{secrets.token_hex(6)}"
    kit.nodeclasses.put(ready_nodeclass(kit.moto, context=context))
    first = await kit.provider.create(make_nodeclaim(name="first"))
    second = await kit.provider.create(make_nodeclaim(name="second"))
    requests = kit.faults.requests["CreateFleet"]
    assert [r["Context"] for r in requests[-2:]] == [context] * 2
    # The fleets EC2 (the emulator; moto alone drops it) made carry it too.
    fleets = kit.ec2().describe_fleets()["Fleets"]
    launched = {
        instance_id
        for fleet in fleets
        if fleet.get("Context") == context
        for entry in fleet.get("Instances", [])
        for instance_id in entry.get("InstanceIds", [])
    }
    assert launched == {(c.status.provider_id or "").rsplit("/", 1)[1] for c in (first, second)}


async def test_changing_a_launch_option_makes_a_new_template(kit: ProviderKit) -> None:
    base = ready_nodeclass(kit.moto, cpu_options=CPUOptions(nested_virtualization="enabled"))
    kit.nodeclasses.put(base)
    await kit.provider.create(make_nodeclaim(name="first"))
    before = _template_data(kit)
    kit.nodeclasses.put(
        attrs.evolve(
            base,
            spec=attrs.evolve(base.spec, cpu_options=CPUOptions(nested_virtualization="disabled")),
        )
    )
    await kit.provider.create(make_nodeclaim(name="second"))
    after = _template_data(kit)
    assert before["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert after["CpuOptions"] == {"NestedVirtualization": "disabled"}
