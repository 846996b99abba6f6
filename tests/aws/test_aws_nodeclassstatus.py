"""EC2NodeClass status on moto: resolved subnets, security groups, AMIs and instance profile,
and bad input (no subnet, unknown alias, role and instanceProfile both set) as clear not-Ready
conditions."""

from __future__ import annotations

import base64
import datetime
import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.meta import ConditionStatus, Quantity
from karpy.apis.v1 import labels as wk
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.runtime.clock import FakeClock
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.ec2nodeclass_network import (
    ConnectionTracking,
    CPUOptions,
    InterfaceType,
    NetworkInterface,
    PlacementGroupSelector,
)
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus
from karpy_aws.apis.kubelet import KubeletConfiguration
from karpy_aws.controllers.nodeclass.status import resolve_status
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.launch import ami_requirements
from karpy_aws.session import AWSSession

from .conftest import (
    AMI_IDS,
    K8S_VERSION,
    REGION,
    SPOT_PRICES,
    SSM_PREFIX,
    FaultInjector,
    Moto,
    ProviderKit,
    boto_client,
    build_kit,
    make_nodeclaim,
    make_nodeclass,
    node_role,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws


class Resolver:
    def __init__(self, session: AWSSession, cluster: str) -> None:
        self.session = session
        self.clock = FakeClock()
        self.cluster = cluster
        self.profiles: InstanceProfiles | None = None

    async def __call__(self, nodeclass: EC2NodeClass) -> EC2NodeClassStatus:
        if self.profiles is None:
            self.profiles = InstanceProfiles(
                await self.session.client("iam"),
                self.clock,
                cluster_name=self.cluster,
                region=REGION,
            )
        return await resolve_status(
            nodeclass,
            ec2=await self.session.client("ec2"),
            ssm=await self.session.client("ssm"),
            profiles=self.profiles,
            k8s_version=K8S_VERSION,
            clock=self.clock,
            ssm_prefix=SSM_PREFIX,
        )


@pytest.fixture
def resolve(session: AWSSession) -> Resolver:
    return Resolver(session, f"cluster-{secrets.token_hex(4)}")


def _conditions(status: EC2NodeClassStatus) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status.value, c.reason, c.message) for c in status.conditions}


async def test_a_good_nodeclass_resolves_everything_and_is_ready(
    resolve: Resolver, moto: Moto, faults: FaultInjector
) -> None:
    role = node_role(moto)
    status = await resolve(make_nodeclass(role=role))
    ids = [s.id for s in status.subnets]
    assert set(ids) == {moto.subnets[k] for k in ("a", "b", "c", "a-small")}
    assert ids[-1] == moto.subnets["a-small"]  # most free addresses first: the /26 comes last
    assert {s.zone for s in status.subnets} == {"us-west-2a", "us-west-2b", "us-west-2c"}
    assert all(s.zone_id for s in status.subnets)
    assert [g.id for g in status.security_groups] == [moto.security_groups["nodes"]]
    assert {a.id for a in status.amis} == {
        AMI_IDS[k] for k in ("al2023x86new", "al2023arm", "al2023gpu", "al2023neuron")
    }
    gpu = next(a for a in status.amis if a.id == AMI_IDS["al2023gpu"])
    assert {(r.key, r.operator.value, r.values) for r in gpu.requirements} == {
        (wk.LABEL_ARCH, "In", ("amd64",)),
        (awslabels.LABEL_AWS_INSTANCE_GPU_COUNT, "Exists", ()),
    }
    assert ami_requirements(gpu).get(awslabels.LABEL_AWS_INSTANCE_GPU_COUNT) is not None  # parses
    assert status.instance_profile is not None
    assert status.instance_profile.startswith(f"{resolve.cluster}_")
    profile = boto_client(moto, "iam").get_instance_profile(
        InstanceProfileName=status.instance_profile
    )
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == [role]
    tags = {t["Key"]: t["Value"] for t in profile["InstanceProfile"].get("Tags", [])}
    assert tags == {
        f"kubernetes.io/cluster/{resolve.cluster}": "owned",
        "eks:eks-cluster-name": resolve.cluster,
        "topology.kubernetes.io/region": REGION,
        "karpenter.k8s.aws/ec2nodeclass": "default",
    }
    conditions = _conditions(status)
    assert set(conditions) == {
        "SubnetsReady",
        "SecurityGroupsReady",
        "AMIsReady",
        "PlacementGroupReady",
        "CapacityReservationsReady",
        "InstanceProfileReady",
        "ValidationSucceeded",
        "Ready",
    }
    assert all(status == "True" for status, _, _ in conditions.values())
    # Within 15 minutes the profile comes from the cache: no IAM call at all.
    faults.sent.clear()
    await resolve(make_nodeclass(role=role))
    assert not {"GetInstanceProfile", "CreateInstanceProfile"} & set(faults.sent)


async def test_no_matching_subnet_is_a_clear_not_ready_condition(
    resolve: Resolver, moto: Moto
) -> None:
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            subnet_selector_terms=(nc.SubnetSelectorTerm(tags={"karpenter.sh/discovery": "nope"}),),
        )
    )
    conditions = _conditions(status)
    assert conditions["SubnetsReady"] == (
        "False",
        "SubnetsNotFound",
        "subnetSelectorTerms did not match any subnets",
    )
    assert status.subnets == ()
    ready = conditions["Ready"]
    assert ready[:2] == ("False", "UnhealthyDependents")
    assert "SubnetsReady=False (SubnetsNotFound" in ready[2]
    assert conditions["AMIsReady"][0] == "True"


@pytest.mark.parametrize(
    ("alias", "reason", "message"),
    [
        pytest.param(
            "al2023@v19990101",
            "AMINotFound",
            "amazon-eks-node-al2023-x86_64-standard-1.31-v19990101",
            id="unknown-version",
        ),
        pytest.param("debian@latest", "AMISelectorInvalid", "unknown family 'debian'", id="family"),
    ],
)
async def test_an_unknown_alias_is_a_clear_not_ready_condition(
    resolve: Resolver, moto: Moto, alias: str, reason: str, message: str
) -> None:
    status = await resolve(
        make_nodeclass(role=node_role(moto), ami_selector_terms=(nc.AMISelectorTerm(alias=alias),))
    )
    state, got_reason, got_message = _conditions(status)["AMIsReady"]
    assert (state, got_reason) == ("False", reason)
    assert message in got_message
    assert status.amis == ()
    assert _conditions(status)["Ready"][0] == "False"


async def test_role_and_instance_profile_together_are_refused(
    resolve: Resolver, moto: Moto
) -> None:
    status = await resolve(make_nodeclass(role="r", instance_profile="p"))
    state, reason, message = _conditions(status)["InstanceProfileReady"]
    assert (state, reason) == ("False", "InstanceProfileInvalid")
    assert "exactly one of ['role', 'instanceProfile']" in message
    assert status.instance_profile is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"ami_selector_terms": (nc.AMISelectorTerm(id="ami-0000000000000000c"),)},
            "spec.amiFamily: required when amiSelectorTerms does not contain an alias",
            id="no-ami-family",
        ),
        pytest.param(
            {"metadata_options": nc.MetadataOptions(http_tokens="sometimes")},
            "spec.metadataOptions.httpTokens: 'sometimes'",
            id="imds",
        ),
        pytest.param(
            {
                "instance_store_policy": nc.InstanceStorePolicy.RAID0,
                "ami_selector_terms": (nc.AMISelectorTerm(alias="windows2022@latest"),),
            },
            "spec.instanceStorePolicy: RAID0 is not available for amiFamily Windows2022",
            id="raid0-on-windows",
        ),
        pytest.param(
            {
                "network_interfaces": (
                    NetworkInterface(
                        network_card_index=0, device_index=0, interface_type=InterfaceType.INTERFACE
                    ),
                    NetworkInterface(
                        network_card_index=0, device_index=0, interface_type=InterfaceType.INTERFACE
                    ),
                )
            },
            "spec.networkInterfaces: needs exactly one primary interface",
            id="two-primary-interfaces",
        ),
        pytest.param(
            {"kubelet": KubeletConfiguration(kube_reserved={"memory": Quantity("lots")})},
            "kubelet.kubeReserved[memory]",
            id="kubelet-quantity",
        ),
    ],
)
async def test_launch_settings_a_launch_could_not_use_fail_validation(
    resolve: Resolver, moto: Moto, spec: dict[str, Any], message: str
) -> None:
    status = await resolve(make_nodeclass(role=node_role(moto), **spec))
    state, reason, got = _conditions(status)["ValidationSucceeded"]
    assert (state, reason) == ("False", "NodeClassInvalid")
    assert message in got
    assert _conditions(status)["Ready"][0] == "False"


# Every field karpy has accepted without acting on, set at once; each one karpy still does not
# build must be refused by name (the rest are built and tested with the launch).
EVERY_ADVANCED_FIELD: dict[str, Any] = {
    "capacity_reservation_selector_terms": (nc.CapacityReservationSelectorTerm(id="cr-0abc"),),
    "instance_store_policy": nc.InstanceStorePolicy.RAID0,
    "context": "my-context",
    "placement_group_selector": PlacementGroupSelector(name="ml-training-pg"),
    "network_interfaces": (
        NetworkInterface(
            network_card_index=0, device_index=0, interface_type=InterfaceType.INTERFACE
        ),
        NetworkInterface(
            network_card_index=1, device_index=0, interface_type=InterfaceType.EFA_ONLY
        ),
    ),
    "ip_prefix_count": 1,
    "connection_tracking": ConnectionTracking(tcp_established_timeout=3600),
    "cpu_options": CPUOptions(nested_virtualization="enabled"),
    "block_device_mappings": (
        nc.BlockDeviceMapping(
            device_name="/dev/xvda",
            ebs=nc.BlockDevice(volume_size=Quantity("20Gi"), volume_initialization_rate=200),
        ),
    ),
}


async def test_fields_karpy_does_not_build_yet_are_refused_by_name(
    resolve: Resolver, moto: Moto, kit: ProviderKit
) -> None:
    nodeclass = make_nodeclass(role=node_role(moto), **EVERY_ADVANCED_FIELD)
    status = await resolve(nodeclass)
    state, reason, message = _conditions(status)["ValidationSucceeded"]
    refused = {
        name: f"karpy does not support {what} yet; remove {name}"
        for name, what in nc.NOT_YET_SUPPORTED.items()
    }
    if not refused:
        assert state == "True"
        return
    assert (state, reason) == ("False", "NodeClassInvalid")
    assert _conditions(status)["Ready"][0] == "False"
    for name, words in refused.items():
        assert words in message, name
    assert message.count("karpy does not support") == len(refused)
    # A NodeClass that skipped the status check (Ready from before an upgrade) launches nothing.
    launched_before = len(kit.faults.requests.get("CreateFleet", []))
    kit.nodeclasses.put(attrs.evolve(ready_nodeclass(moto), spec=nodeclass.spec))
    with pytest.raises(NodeClassNotReadyError, match="karpy does not support"):
        await kit.provider.create(make_nodeclaim())
    assert len(kit.faults.requests.get("CreateFleet", [])) == launched_before


async def test_the_placement_group_resolves_by_name_or_id_and_reaches_the_launch(
    resolve: Resolver, moto: Moto, kit: ProviderKit
) -> None:
    name = f"pg-{secrets.token_hex(4)}"
    created = boto_client(moto, "ec2").create_placement_group(
        GroupName=name, Strategy="partition", PartitionCount=3
    )["PlacementGroup"]
    by_name = await resolve(
        make_nodeclass(
            role=node_role(moto), placement_group_selector=PlacementGroupSelector(name=name)
        )
    )
    assert _conditions(by_name)["PlacementGroupReady"][0] == "True"
    (group,) = by_name.placement_groups
    assert (group.id, group.name, group.strategy.value, group.partition_count) == (
        created["GroupId"],
        name,
        "partition",
        3,
    )
    nodeclass = make_nodeclass(
        role=node_role(moto),
        placement_group_selector=PlacementGroupSelector(id=created["GroupId"]),
    )
    by_id = await resolve(nodeclass)
    assert by_id.placement_groups == by_name.placement_groups
    kit.nodeclasses.put(
        EC2NodeClass(metadata=nodeclass.metadata, spec=nodeclass.spec, status=by_id)
    )
    await kit.provider.create(make_nodeclaim())
    template = kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"
    ]["LaunchTemplateName"]
    data = boto_client(moto, "ec2").describe_launch_template_versions(LaunchTemplateName=template)[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["Placement"] == {"GroupId": created["GroupId"]}


async def test_an_unknown_placement_group_is_named_and_not_ready(
    resolve: Resolver, moto: Moto
) -> None:
    status = await resolve(
        make_nodeclass(
            role=node_role(moto),
            placement_group_selector=PlacementGroupSelector(name="no-such-group"),
        )
    )
    state, reason, message = _conditions(status)["PlacementGroupReady"]
    assert (state, reason) == ("False", "PlacementGroupNotFound")
    assert "placementGroupSelector" in message
    assert "no-such-group" in message
    assert status.placement_groups == ()
    assert _conditions(status)["Ready"][0] == "False"


async def test_every_built_launch_option_resolves_ready_and_reaches_ec2(
    resolve: Resolver, moto: Moto, session: AWSSession, faults: FaultInjector
) -> None:
    """Every field but the refused ones at once, from status resolution to moto's template."""
    name = f"pg-{secrets.token_hex(4)}"
    group = boto_client(moto, "ec2").create_placement_group(GroupName=name, Strategy="cluster")
    fields = {
        k: v for k, v in EVERY_ADVANCED_FIELD.items() if k != "capacity_reservation_selector_terms"
    }
    fields["placement_group_selector"] = PlacementGroupSelector(name=name)
    nodeclass = make_nodeclass(role=node_role(moto), **fields)
    status = await resolve(nodeclass)
    assert _conditions(status)["Ready"][0] == "True", _conditions(status)
    kit = await build_kit(session, faults, moto, spot_prices={**SPOT_PRICES, "c6in.32xlarge": 2.0})
    kit.nodeclasses.put(
        EC2NodeClass(metadata=nodeclass.metadata, spec=nodeclass.spec, status=status)
    )
    launched = await kit.provider.create(make_nodeclaim())
    assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "c6in.32xlarge"  # two cards
    fleet = faults.requests["CreateFleet"][-1]
    assert fleet["Context"] == "my-context"
    template = fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"][
        "LaunchTemplateName"
    ]
    data = boto_client(moto, "ec2").describe_launch_template_versions(LaunchTemplateName=template)[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert data["Placement"] == {"GroupId": group["PlacementGroup"]["GroupId"]}
    primary, efa_only = data["NetworkInterfaces"]
    assert (primary["InterfaceType"], primary["Ipv4PrefixCount"]) == ("interface", 1)
    assert primary["ConnectionTrackingSpecification"] == {"TcpEstablishedTimeout": 3600}
    assert (efa_only["NetworkCardIndex"], efa_only["InterfaceType"]) == (1, "efa-only")
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeInitializationRate"] == 200
    assert "RAID0" in base64.b64decode(data["UserData"]).decode()


async def test_a_given_instance_profile_must_exist(resolve: Resolver, moto: Moto) -> None:
    name = f"mine-{secrets.token_hex(4)}"
    missing = await resolve(make_nodeclass(role=None, instance_profile=name))
    state, reason, message = _conditions(missing)["InstanceProfileReady"]
    assert (state, reason) == ("False", "InstanceProfileNotFound")
    assert name in message
    boto_client(moto, "iam").create_instance_profile(InstanceProfileName=name)
    found = await resolve(make_nodeclass(role=None, instance_profile=name))
    assert found.instance_profile == name
    assert _conditions(found)["InstanceProfileReady"][0] == "True"


async def test_a_role_that_does_not_exist_is_named(resolve: Resolver, moto: Moto) -> None:
    status = await resolve(make_nodeclass(role="arn:aws:iam::123456789012:role/ghost"))
    state, reason, message = _conditions(status)["InstanceProfileReady"]
    assert (state, reason) == ("False", "InstanceProfileCreationFailed")
    assert "ghost" in message


async def test_unchanged_conditions_keep_their_transition_time(
    resolve: Resolver, moto: Moto
) -> None:
    role = node_role(moto)
    first = await resolve(make_nodeclass(role=role))
    resolve.clock.step(datetime.timedelta(minutes=20))
    nodeclass = make_nodeclass(role=role)
    again = await resolve(
        EC2NodeClass(metadata=nodeclass.metadata, spec=nodeclass.spec, status=first)
    )
    before = {c.type: c.last_transition_time for c in first.conditions}
    assert {c.type: c.last_transition_time for c in again.conditions} == before
    broken = make_nodeclass(
        role=role, subnet_selector_terms=(nc.SubnetSelectorTerm(tags={"x": "none"}),)
    )
    after = await resolve(EC2NodeClass(metadata=broken.metadata, spec=broken.spec, status=again))
    times = {c.type: (c.status, c.last_transition_time) for c in after.conditions}
    assert times["SubnetsReady"] == (ConditionStatus.FALSE, resolve.clock.now())
    assert times["AMIsReady"] == (ConditionStatus.TRUE, before["AMIsReady"])


async def test_a_resolved_status_is_what_the_launch_uses(
    resolve: Resolver, moto: Moto, kit: ProviderKit
) -> None:
    nodeclass = make_nodeclass(role=node_role(moto))
    status = await resolve(nodeclass)
    kit.nodeclasses.put(
        EC2NodeClass(metadata=nodeclass.metadata, spec=nodeclass.spec, status=status)
    )
    arm = await kit.provider.create(make_nodeclaim((wk.LABEL_ARCH, "In", ("arm64",))))
    assert arm.status.image_id == AMI_IDS["al2023arm"]
    x86 = await kit.provider.create(make_nodeclaim((wk.LABEL_ARCH, "In", ("amd64",))))
    assert x86.status.image_id == AMI_IDS["al2023x86new"]
    # moto does not apply a launch template's profile or groups to fleet instances, so the
    # template itself is checked (moto-notes: "check the launch template itself").
    ec2 = kit.ec2()
    name = kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"
    ]["LaunchTemplateName"]
    version = ec2.describe_launch_template_versions(LaunchTemplateName=name)[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert version["IamInstanceProfile"] == {"Name": status.instance_profile}
    assert version["SecurityGroupIds"] == [moto.security_groups["nodes"]]
    assert version["ImageId"] == AMI_IDS["al2023x86new"]
    assert version["MetadataOptions"]["HttpTokens"] == "required"
