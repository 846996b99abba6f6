"""The AWS provider end to end, as `karpy run` runs it, for what an EC2NodeClass promises and the
workloads that need it: one emulator (moto and the kubelet bridge) and one daemon, five
scenarios at once, each with NodePools of its own, each checking what karpy sent to moto.

* **Seed 003.** The article's AWSNodeTemplate and Provisioner (re-indented, tests/data/seeds),
  converted by `karpy convert`, applied as converted, except that the pool's zones are the
  emulator's (the world is in us-west-2; the seed's cluster was in ap-northeast-2) and its
  template carries a label the test's pod selects. The emulator runs for the seed's cluster name,
  so its discovery tags select the seeded subnets and group as written. Every field shows in
  the launch template moto stored (the gp3 volume with its IOPS, throughput and KMS key,
  detailed monitoring, the instance profile, the AL2 AMI, metadata options, the kubelet's
  eviction grace period in the AL2 user data, the tags) and in the fleet request (the types
  satisfy the pool's category, generation and hypervisor requirements, in the discovered
  subnets); once the node registered and karpy's tagging loop marked the NodeClaim, the
  instance still carries the seed's `Name` tag.
* **Security Groups for Pods.** A pod asking for `vpc.amazonaws.com/pod-eni` runs on m5.large,
  which trunks ENIs, not on the cheaper t3.medium, which does not.
* **EFA.** A pod asking for `vpc.amazonaws.com/efa` runs on c5n.18xlarge (not on m5.large,
  which has no EFA), launched from a template with its EFA interface.
* **A capacity reservation** (the emulator's; moto has none) of two m5.xlarge: three pods that
  each fill one are launched in one pass, two into the reservation and one on-demand, none
  refused by EC2. The reservation is then cancelled: a fourth pod gets an on-demand node, and
  the reserved NodeClaims and their Nodes are relabelled `on-demand` (not replaced).
* **An impaired instance.** An instance reported impaired (ReportInstanceStatus, which the
  emulator turns into a failed status check) is found by karpy's instance-status polling, its
  NodeClaim replaced, and its pod runs again on a new instance.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import secrets
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.exceptions import ClientError
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.convert.cli import main as convert_main
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from karpy.operator.demo_aws import emulator as start_emulator
from karpy_aws.apis import labels as awslabels
from karpy_aws_emulator.world import AMI_IDS
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    is_ready,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.e2e.test_aws_walkthrough import _nodeclass
from tests.support.awsworld import ec2_nodepool
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    pytest.mark.aws,
    # Five scenarios in one test, two of them waiting on once-a-minute polls (instance status,
    # reservations): longer than one scenario, shorter than five tests with an emulator each.
    pytest.mark.timeout(600),
]

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
SEED_CLUSTER = "bys-dev-eks-main"
"""Seed 003's cluster: its AWSNodeTemplate discovers subnets and groups tagged for it."""
SEED_PROFILE = "KarpenterInstanceProfile"
AL2_VERSION = "1.32"
"""The last Kubernetes version EKS publishes AL2 AMIs for."""
SEED_NAME_TAG = "karpenter-eks-main/karpenter-default"
KMS_KEY = "arn:aws:kms:ap-northeast-2:558846430793:key/6f29df3a-fb94-48e4-b359-a88fb74ce78d"
ZONES = ("us-west-2a", "us-west-2b")
POD_ENI = "vpc.amazonaws.com/pod-eni"
EFA = "vpc.amazonaws.com/efa"
TAGGED = "karpenter.k8s.aws/tagged"
RID = awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID
PLAIN = "plain"
"""The EC2NodeClass of the pod-eni, EFA and impaired scenarios."""
RESERVING = "reserving"
"""The EC2NodeClass that selects the reservation."""


@pytest.fixture
async def emulator(
    cluster_info: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Emulator]:
    """moto and the bridge for seed 003's cluster; karpy gets moto's AWS environment."""
    log_path = tmp_path / "emulator.log"
    with log_path.open("w") as log:
        async with start_emulator(
            kubeconfig=cluster_info.kubeconfig, cluster_name=SEED_CLUSTER, log=log
        ) as started:
            for key, value in started.environment().items():
                monkeypatch.setenv(key, value)
            yield started
    assert started.exit_code == 0, log_path.read_text()


def _client(emulator: Emulator, service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name=emulator.ready["region"], endpoint_url=emulator.ready["endpoint"]
    )


async def _aws(call: Any, /, **kwargs: Any) -> Any:
    return await asyncio.to_thread(call, **kwargs)


def _converted_seed() -> list[dict[str, Any]]:
    """Seed 003's manifests as `karpy convert --provider aws` writes them (in this process)."""
    out = io.StringIO()
    paths = [str(SEEDS / f"003-{k}-indented.yaml") for k in ("awsnodetemplate", "provisioner")]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = convert_main(["--provider", "aws", "--cluster-name", SEED_CLUSTER, *paths])
    assert code == 0
    return [d for d in yaml.safe_load_all(out.getvalue()) if d]


def _pool(
    name: str, nodeclass: str, types: Sequence[str], capacity_types: Sequence[str]
) -> dict[str, Any]:
    return ec2_nodepool(
        name,
        nodeclass=nodeclass,
        intent=name,
        requirements={
            wk.LABEL_INSTANCE_TYPE: types,
            wk.LABEL_TOPOLOGY_ZONE: ZONES[:1],
            wk.LABEL_CAPACITY_TYPE: capacity_types,
        },
        disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h"},
    )


def _asking(name: str, resource: str, count: str, **kwargs: Any) -> dict[str, Any]:
    """A Deployment of `name`'s pool whose pods ask for `count` of an extended resource."""
    body = deployment(name, node_selector={"intent": name}, **kwargs)
    resources = body["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][resource] = count
    resources["limits"] = {resource: count}  # an extended resource cannot be overcommitted
    return body


class World:
    """The test's handles: the apiserver, moto, and the reads every scenario shares."""

    def __init__(self, api: client.ApiClient, namespace: str, emulator: Emulator) -> None:
        self.api = api
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.ec2 = _client(emulator, "ec2")
        self.iam = _client(emulator, "iam")
        self.cluster = emulator.cluster_name

    async def create(self, manifest: dict[str, Any]) -> None:
        group, version = manifest["apiVersion"].split("/")
        plural = "nodepools" if manifest["kind"] == "NodePool" else "ec2nodeclasses"
        await self.custom.create_cluster_custom_object(group, version, plural, manifest)

    async def nodeclass(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.custom.get_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
        )
        return found

    async def wait_ready(self, name: str) -> None:
        async def ready() -> bool:
            return is_ready(await self.nodeclass(name))

        try:
            await eventually(ready, within=90, what=f"EC2NodeClass {name} Ready")
        except AssertionError as error:
            conditions = (await self.nodeclass(name)).get("status", {}).get("conditions")
            raise AssertionError(f"{error}; conditions: {conditions}") from error

    async def instance(self, provider_id: str) -> dict[str, Any]:
        instance_id = provider_id.rsplit("/", 1)[-1]
        answer = await _aws(self.ec2.describe_instances, InstanceIds=[instance_id])
        (found,) = [i for r in answer["Reservations"] for i in r["Instances"]]
        return dict(found)

    async def templates(self, nodeclass: str) -> dict[str, dict[str, Any]]:
        """The NodeClass's launch templates in moto: name -> the data karpy gave it."""
        listed = await _aws(
            self.ec2.describe_launch_templates,
            Filters=[{"Name": f"tag:{awslabels.LABEL_AWS_EC2NODECLASS}", "Values": [nodeclass]}],
        )
        out = {}
        for template in listed["LaunchTemplates"]:
            name = template["LaunchTemplateName"]
            try:
                versions = await _aws(
                    self.ec2.describe_launch_template_versions,
                    LaunchTemplateId=template["LaunchTemplateId"],
                )
            except ClientError as error:  # replaced since it was listed
                if "NotFound" not in error.response["Error"]["Code"]:
                    raise
                continue
            out[name] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        return out

    async def fleet_configs(self, templates: Sequence[str]) -> list[dict[str, Any]]:
        """The LaunchTemplateConfigs of every fleet moto keeps that used one of `templates`."""
        fleets = (await _aws(self.ec2.describe_fleets))["Fleets"]
        return [
            config
            for fleet in fleets
            for config in fleet.get("LaunchTemplateConfigs", [])
            if config["LaunchTemplateSpecification"].get("LaunchTemplateName") in templates
        ]

    async def pods_running(self, app: str, count: int) -> list[Any]:
        found: list[Any] = await eventually(
            running(self.api, self.namespace, app, count), within=300, what=f"{count} {app} pods"
        )
        return found

    async def claim_of(self, node_name: str) -> dict[str, Any]:
        """The NodeClaim of a Node, by its providerID (known from the launch on, where the
        NodeClaim's nodeName waits for karpy's registration pass)."""
        node = await self.core.read_node(node_name)
        listed = await self.custom.list_cluster_custom_object(wk.GROUP, "v1", "nodeclaims")
        (claim,) = [
            c
            for c in listed["items"]
            if c.get("status", {}).get("providerID") == node.spec.provider_id
        ]
        return dict(claim)


async def test_aws_workloads_end_to_end(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str, emulator: Emulator
) -> None:
    world = World(api_client, namespace, emulator)
    # What an admin sets up beforehand: the seed's instance profile, and a reservation.
    await _aws(world.iam.create_instance_profile, InstanceProfileName=SEED_PROFILE)
    await _aws(
        world.iam.add_role_to_instance_profile,
        InstanceProfileName=SEED_PROFILE,
        RoleName=emulator.ready["nodeClass"]["spec"]["role"],
    )
    team = f"team-{secrets.token_hex(3)}"
    reservation = (
        await _aws(
            world.ec2.create_capacity_reservation,
            InstanceType="m5.xlarge",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone=ZONES[0],
            InstanceCount=2,
            InstanceMatchCriteria="targeted",
            TagSpecifications=[
                {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": team}]}
            ],
        )
    )["CapacityReservation"]["CapacityReservationId"]

    seed = _converted_seed()
    seed_pool = next(d for d in seed if d["kind"] == "NodePool")
    for requirement in seed_pool["spec"]["template"]["spec"]["requirements"]:
        if requirement["key"] == wk.LABEL_TOPOLOGY_ZONE:
            requirement["values"] = list(ZONES)  # the emulator's region, not the seed's
    seed_pool["spec"]["template"]["metadata"]["labels"]["intent"] = "seed"
    seed_class = seed_pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
    reserving = _nodeclass(RESERVING, SEED_CLUSTER)
    reserving["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": team}}]
    plain = _nodeclass(PLAIN, SEED_CLUSTER)
    for manifest in (
        *seed,
        plain,
        reserving,
        _pool("sgp", PLAIN, ("t3.medium", "m5.large"), ("on-demand",)),
        _pool("efa", PLAIN, ("m5.large", "c5n.18xlarge"), ("on-demand",)),
        _pool("sick", PLAIN, ("m5.large",), ("on-demand",)),
        _pool("reserved", RESERVING, ("m5.xlarge",), ("reserved", "on-demand")),
    ):
        await world.create(manifest)
    await create_deployment(
        api_client, namespace, deployment("seed", node_selector={"intent": "seed"}, cpu="100m")
    )
    await create_deployment(api_client, namespace, _asking("sgp", POD_ENI, "1", cpu="100m"))
    await create_deployment(api_client, namespace, _asking("efa", EFA, "1", cpu="100m"))
    await create_deployment(
        api_client, namespace, deployment("sick", node_selector={"intent": "sick"}, cpu="100m")
    )
    await create_deployment(
        api_client,
        namespace,
        deployment("reserved", node_selector={"intent": "reserved"}, cpu="3", memory="1Gi"),
    )

    # AL2 (the seed's family) is published up to Kubernetes 1.32; the local control plane is
    # newer, so the nodes run 1.32, one minor behind it, as the version skew policy allows.
    flags = [*emulator.flags(), "--provider-setting", f"kubernetes-version={AL2_VERSION}"]
    async with running_daemon(cluster_info, flags=flags):
        for name in (seed_class, PLAIN, RESERVING):
            await world.wait_ready(name)
        async with asyncio.TaskGroup() as group:
            group.create_task(_seed_003(world, seed_class))
            group.create_task(_pod_eni(world))
            group.create_task(_efa(world))
            group.create_task(_reservation(world, reservation))
            group.create_task(_impaired(world))


async def _seed_003(world: World, nodeclass: str) -> None:
    await scale(world.api, world.namespace, "seed", 1)
    (pod,) = await world.pods_running("seed", 1)

    async def tagged() -> dict[str, Any]:
        claim = await world.claim_of(pod.spec.node_name)
        return claim if claim["metadata"].get("annotations", {}).get(TAGGED) == "true" else {}

    claim = await eventually(tagged, within=120, what="the seed's NodeClaim tagged")
    instance = await world.instance(claim["status"]["providerID"])
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    assert tags["Name"] == SEED_NAME_TAG  # the user's, kept after registration
    assert tags["auto-delete"] == "no"
    assert tags["karpenter.sh/nodeclaim"] == claim["metadata"]["name"]
    assert tags["eks:eks-cluster-name"] == SEED_CLUSTER

    templates = await world.templates(nodeclass)
    assert templates
    groups = await _aws(
        world.ec2.describe_security_groups,
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [SEED_CLUSTER]}],
    )
    group_ids = sorted(g["GroupId"] for g in groups["SecurityGroups"])
    for data in templates.values():
        (volume,) = data["BlockDeviceMappings"]
        assert volume["DeviceName"] == "/dev/xvda"
        assert volume["Ebs"] == {
            "VolumeSize": 30,
            "VolumeType": "gp3",
            "Iops": 3000,
            "Encrypted": True,
            "KmsKeyId": KMS_KEY,
            "DeleteOnTermination": True,
            "Throughput": 125,
        }
        assert data["Monitoring"] == {"Enabled": True}
        assert data["IamInstanceProfile"] == {"Name": SEED_PROFILE}
        assert data["ImageId"] in {AMI_IDS["al2x86"], AMI_IDS["al2arm"], AMI_IDS["al2gpu"]}
        assert data["MetadataOptions"] == {
            "HttpEndpoint": "enabled",
            "HttpProtocolIpv6": "disabled",
            "HttpPutResponseHopLimit": 2,
            "HttpTokens": "required",
        }
        assert sorted(data["SecurityGroupIds"]) == group_ids
        user_data = base64.b64decode(data["UserData"]).decode()
        assert "/etc/eks/bootstrap.sh" in user_data  # AL2's bootstrap
        assert "--eviction-max-pod-grace-period=60" in user_data
        tagged_as = {
            (spec["ResourceType"], t["Key"], t["Value"])
            for spec in data["TagSpecifications"]
            for t in spec["Tags"]
        }
        # The template carries the tags; the instance got them from the fleet (above).
        assert ("launch-template", "Name", SEED_NAME_TAG) in tagged_as
        assert ("launch-template", "auto-delete", "no") in tagged_as
    assert instance["ImageId"] in {d["ImageId"] for d in templates.values()}

    configs = await world.fleet_configs(list(templates))
    overrides = [o for c in configs for o in c.get("Overrides", [])]
    assert instance["InstanceType"] in {o["InstanceType"] for o in overrides}
    offered = sorted({o["InstanceType"] for o in overrides})
    described = await _aws(world.ec2.describe_instance_types, InstanceTypes=offered)
    for info in described["InstanceTypes"]:
        name = info["InstanceType"]
        family = name.split(".")[0]
        assert family[0] in "cmrt", name
        assert int(next(ch for ch in family if ch.isdigit())) > 3, name
        assert info.get("Hypervisor") == "nitro", name
    subnets = await _aws(
        world.ec2.describe_subnets,
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [SEED_CLUSTER]}],
    )
    zone_of = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets["Subnets"]}
    assert {o["SubnetId"] for o in overrides} <= set(zone_of)
    assert {zone_of[o["SubnetId"]] for o in overrides} <= set(ZONES)


async def _pod_eni(world: World) -> None:
    await scale(world.api, world.namespace, "sgp", 1)
    (pod,) = await world.pods_running("sgp", 1)
    node = await world.core.read_node(pod.spec.node_name)
    assert node.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "m5.large"  # t3.medium cannot trunk
    assert node.status.allocatable[POD_ENI] == "9"
    claim = await world.claim_of(pod.spec.node_name)
    instance = await world.instance(claim["status"]["providerID"])
    assert instance["InstanceType"] == "m5.large"


async def _efa(world: World) -> None:
    await scale(world.api, world.namespace, "efa", 1)
    (pod,) = await world.pods_running("efa", 1)
    node = await world.core.read_node(pod.spec.node_name)
    assert node.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "c5n.18xlarge"
    claim = await world.claim_of(pod.spec.node_name)
    instance = await world.instance(claim["status"]["providerID"])
    assert instance["InstanceType"] == "c5n.18xlarge"
    templates = await world.templates(PLAIN)
    with_efa = {
        name: data
        for name, data in templates.items()
        if any(i.get("InterfaceType") == "efa" for i in data.get("NetworkInterfaces", []))
    }
    assert with_efa
    configs = await world.fleet_configs(list(with_efa))
    assert {o["InstanceType"] for c in configs for o in c.get("Overrides", [])} == {"c5n.18xlarge"}
    for data in with_efa.values():
        # c5n.18xlarge: one network card, one EFA interface on it.
        interfaces = [
            (i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"])
            for i in data["NetworkInterfaces"]
        ]
        assert interfaces == [(0, 0, "efa")]


async def _reservation(world: World, reservation: str) -> None:
    # Three pods, each filling an m5.xlarge, in one pass: the reservation has room for two.
    await scale(world.api, world.namespace, "reserved", 3)
    pods = await world.pods_running("reserved", 3)
    first = {p.spec.node_name for p in pods}
    claims = [await world.claim_of(p.spec.node_name) for p in pods]
    kinds = sorted(c["metadata"]["labels"][wk.LABEL_CAPACITY_TYPE] for c in claims)
    assert kinds == ["on-demand", "reserved", "reserved"]
    reserved = [c for c in claims if c["metadata"]["labels"][wk.LABEL_CAPACITY_TYPE] == "reserved"]
    assert {c["metadata"]["labels"][RID] for c in reserved} == {reservation}
    for claim in reserved:
        instance = await world.instance(claim["status"]["providerID"])
        assert instance["InstanceType"] == "m5.xlarge"
    # No launch was refused for want of room: every NodeClaim of the pool launched first time.
    assert len(await nodeclaims(world.api, "reserved")) == 3

    await _aws(world.ec2.cancel_capacity_reservation, CapacityReservationId=reservation)
    await scale(world.api, world.namespace, "reserved", 4)
    pods = await world.pods_running("reserved", 4)
    fourth = next(p for p in pods if p.spec.node_name not in first)
    late = await world.claim_of(fourth.spec.node_name)
    assert late["metadata"]["labels"][wk.LABEL_CAPACITY_TYPE] == "on-demand"

    names = {c["metadata"]["name"] for c in reserved}

    async def relabelled() -> bool:
        current = [
            c for c in await nodeclaims(world.api, "reserved") if c["metadata"]["name"] in names
        ]
        if len(current) != len(names):
            return False
        for claim in current:
            labels = claim["metadata"]["labels"]
            if labels[wk.LABEL_CAPACITY_TYPE] != "on-demand" or RID in labels:
                return False
            node_name = claim.get("status", {}).get("nodeName")
            if not node_name:
                return False
            node = await world.core.read_node(node_name)
            if (
                node.metadata.labels[wk.LABEL_CAPACITY_TYPE] != "on-demand"
                or RID in node.metadata.labels
            ):
                return False
        return True

    # karpy checks its reservations once a minute; the nodes keep running throughout.
    await eventually(relabelled, within=150, what="the ended reservation's nodes on-demand")
    assert all(
        c["metadata"].get("deletionTimestamp") is None
        for c in await nodeclaims(world.api, "reserved")
    )


async def _impaired(world: World) -> None:
    await scale(world.api, world.namespace, "sick", 1)
    (pod,) = await world.pods_running("sick", 1)
    claim = await world.claim_of(pod.spec.node_name)
    provider_id = claim["status"]["providerID"]
    instance_id = provider_id.rsplit("/", 1)[-1]
    await _aws(
        world.ec2.report_instance_status,
        Instances=[instance_id],
        Status="impaired",
        ReasonCodes=["unresponsive"],
    )

    async def replaced() -> list[Any]:
        claims = await nodeclaims(world.api, "sick")
        if any(c["metadata"]["name"] == claim["metadata"]["name"] for c in claims):
            return []
        found = await running(world.api, world.namespace, "sick", 1)()
        return found if found and found[0].spec.node_name != pod.spec.node_name else []

    # karpy polls instance status once a minute, then replaces the node.
    (moved,) = await eventually(replaced, within=240, what="the impaired instance replaced")
    new_claim = await world.claim_of(moved.spec.node_name)
    assert new_claim["status"]["providerID"] != provider_id

    async def terminated() -> bool:
        state = (await world.instance(provider_id))["State"]["Name"]
        return state in ("shutting-down", "terminated")

    await eventually(terminated, within=120, what="the impaired instance terminated")
