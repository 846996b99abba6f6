"""AWSCloudProvider on moto: the CreateFleet request's shape, the NodeClaim it returns, and
get/list/delete through DescribeInstances and TerminateInstances."""

from __future__ import annotations

import datetime
import logging
import re
from typing import Any

import attrs
import pytest

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClaimRequirement, NodeClassReference, RequirementOperator
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.cloudprovider import (
    CloudProvider,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassKind,
    NodeClassNotReadyError,
)
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.instance import Instances, parse_provider_id
from karpy_aws.providers.instancetype.trunking import branch_interfaces
from karpy_aws.providers.launch import MAX_INSTANCE_TYPES
from karpy_aws.session import AWSSession
from karpy_kwok.apis import labels as kwoklabels

from .conftest import (
    AMI_IDS,
    SPOT_PRICES,
    ZONE_FACTORS,
    ProviderKit,
    make_nodeclaim,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws

ZONE = wk.LABEL_TOPOLOGY_ZONE
CT = wk.LABEL_CAPACITY_TYPE
IT = wk.LABEL_INSTANCE_TYPE


def _fleet(kit: ProviderKit) -> dict[str, Any]:
    requests = kit.faults.requests["CreateFleet"]
    return requests[-1]


def _overrides(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]


async def test_the_provider_keeps_the_cloudprovider_contract(kit: ProviderKit) -> None:
    provider = kit.provider
    assert isinstance(provider, CloudProvider)
    assert provider.name == "aws"
    assert provider.supported_node_classes() == (
        NodeClassKind("karpenter.k8s.aws", "EC2NodeClass"),
    )
    assert {(p.condition_type, p.condition_status) for p in provider.repair_policies()} >= {
        ("Ready", "False"),
        ("Ready", "Unknown"),
    }


async def test_spot_fleet_crosses_types_and_zones_on_the_roomiest_subnets(kit: ProviderKit) -> None:
    launched = await kit.provider.create(make_nodeclaim())
    request = _fleet(kit)
    assert request["Type"] == "instant"
    assert request["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "spot",
    }
    assert request["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert "OnDemandOptions" not in request
    overrides = _overrides(request)
    types = {o["InstanceType"] for o in overrides}
    # metal is exotic; m5.xlarge's spot price is above the cheapest on-demand price.
    assert types == {"t3.micro", "c6g.large", "c5.large", "m5.large"}
    assert len(types) <= MAX_INSTANCE_TYPES
    # Every type in every zone the NodeClass has a subnet in (2d has none).
    assert {(o["InstanceType"], o["AvailabilityZone"]) for o in overrides} == {
        (t, z) for t in types for z in ("us-west-2a", "us-west-2b", "us-west-2c")
    }
    subnet_of = {"us-west-2a": "a", "us-west-2b": "b", "us-west-2c": "c"}
    for o in overrides:
        assert o["SubnetId"] == kit.moto.subnets[subnet_of[o["AvailabilityZone"]]]  # not a-small
        expected = SPOT_PRICES[o["InstanceType"]] * ZONE_FACTORS[o["AvailabilityZone"]]
        assert o["Priority"] == pytest.approx(expected)
        arm = o["InstanceType"] == "c6g.large"
        assert o["ImageId"] == AMI_IDS["al2023arm" if arm else "al2023x86new"]
    # One launch template per (AMI, max pods); the cheapest override comes first.
    for config in request["LaunchTemplateConfigs"]:
        images = {o["ImageId"] for o in config["Overrides"]}
        assert len(images) == 1
        assert config["LaunchTemplateSpecification"]["LaunchTemplateName"].startswith(
            "karpenter.k8s.aws/"
        )
    assert overrides[0]["Priority"] == min(o["Priority"] for o in overrides)
    tags = {
        spec["ResourceType"]: {t["Key"]: t["Value"] for t in spec["Tags"]}
        for spec in request["TagSpecifications"]
    }
    assert set(tags) == {"instance", "volume", "fleet"}
    for kind in tags.values():
        assert kind == {
            f"kubernetes.io/cluster/{kit.cluster.name}": "owned",
            "karpenter.sh/nodepool": "default",
            "eks:eks-cluster-name": kit.cluster.name,
            "karpenter.k8s.aws/ec2nodeclass": "default",
            # Set at launch too, so a retried launch can find what it made.
            "karpenter.sh/nodeclaim": "default-abcde",
        }
    # moto takes the first override: the cheapest offering.
    first = overrides[0]
    labels = launched.metadata.labels
    assert labels[IT] == first["InstanceType"] == "t3.micro"
    assert labels[ZONE] == first["AvailabilityZone"] == "us-west-2c"
    assert labels[CT] == wk.CAPACITY_TYPE_SPOT
    assert labels[wk.LABEL_ARCH] == wk.ARCH_AMD64
    assert labels[awslabels.LABEL_AWS_ZONE_ID] == "usw2-az3"
    assert labels[wk.LABEL_TOPOLOGY_REGION] == "us-west-2"
    assert labels[wk.LABEL_NODEPOOL] == "default"
    assert re.fullmatch(r"aws:///us-west-2c/i-[0-9a-f]+", launched.status.provider_id or "")
    assert launched.status.image_id == AMI_IDS["al2023x86new"]
    assert launched.status.capacity["cpu"] == "2"
    assert launched.status.capacity["pods"] == "4"
    assert launched.status.allocatable["cpu"] == "1930m"
    assert awslabels.ANNOTATION_EC2NODECLASS_HASH in launched.metadata.annotations


async def test_on_demand_uses_lowest_price(kit: ProviderKit) -> None:
    launched = await kit.provider.create(
        make_nodeclaim(
            (CT, "In", (wk.CAPACITY_TYPE_ON_DEMAND,)), (IT, "In", ("m5.large", "c5.large"))
        )
    )
    request = _fleet(kit)
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in request
    assert {o["InstanceType"] for o in _overrides(request)} == {"m5.large", "c5.large"}
    assert launched.metadata.labels[CT] == wk.CAPACITY_TYPE_ON_DEMAND
    ec2 = kit.ec2()
    instance_id = (launched.status.provider_id or "").rsplit("/", 1)[1]
    reservation = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]
    instance = reservation["Instances"][0]
    assert "InstanceLifecycle" not in instance
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags[f"kubernetes.io/cluster/{kit.cluster.name}"] == "owned"


async def test_on_demand_with_spot_allowed_and_few_types_warns(
    kit: ProviderKit, caplog: pytest.LogCaptureFixture
) -> None:
    kit.unavailable.mark_capacity_type_unavailable(wk.CAPACITY_TYPE_SPOT, reason="test")
    with caplog.at_level(logging.WARNING, logger="karpy_aws.cloudprovider.provider"):
        launched = await kit.provider.create(make_nodeclaim((IT, "In", ("m5.large",))))
    assert launched.metadata.labels[CT] == wk.CAPACITY_TYPE_ON_DEMAND
    warnings = [r for r in caplog.records if r.name == "karpy_aws.cloudprovider.provider"]
    assert [r.getMessage() for r in warnings] == [
        "at least 5 instance types are recommended when flexible to spot but requesting on-demand"
    ]
    assert warnings[0].__dict__["instance_types"] == 1


async def test_capacity_errors_mark_offerings_the_next_launch_avoids(kit: ProviderKit) -> None:
    spot = (CT, "In", (wk.CAPACITY_TYPE_SPOT,))
    only = make_nodeclaim(spot, (IT, "In", ("m5.large",)), (ZONE, "In", ("us-west-2a",)))
    kit.faults.ice("m5.large", "us-west-2a")
    with pytest.raises(InsufficientCapacityError, match="InsufficientInstanceCapacity"):
        await kit.provider.create(only)
    assert kit.unavailable.is_unavailable(
        capacity_type=wk.CAPACITY_TYPE_SPOT, instance_type="m5.large", zone="us-west-2a"
    )
    kit.faults.ice_offerings.clear()
    # The next launch leaves the refused offering out and lands elsewhere.
    wider = make_nodeclaim(
        spot, (IT, "In", ("m5.large",)), (ZONE, "In", ("us-west-2a", "us-west-2b"))
    )
    launched = await kit.provider.create(wider)
    assert {(o["InstanceType"], o["AvailabilityZone"]) for o in _overrides(_fleet(kit))} == {
        ("m5.large", "us-west-2b")
    }
    assert launched.metadata.labels[ZONE] == "us-west-2b"
    # Nothing else can serve the narrow claim right now: no fleet call at all.
    calls = len(kit.faults.requests["CreateFleet"])
    with pytest.raises(InsufficientCapacityError):
        await kit.provider.create(only)
    assert len(kit.faults.requests["CreateFleet"]) == calls
    # Three minutes later the offering is tried again.
    kit.clock.step(datetime.timedelta(minutes=3))
    await kit.provider.create(only)
    assert _overrides(_fleet(kit))[0]["AvailabilityZone"] == "us-west-2a"


async def test_partial_capacity_errors_still_launch_and_are_remembered(kit: ProviderKit) -> None:
    kit.faults.ice("t3.micro", "us-west-2c")
    launched = await kit.provider.create(make_nodeclaim())
    assert (launched.metadata.labels[IT], launched.metadata.labels[ZONE]) != (
        "t3.micro",
        "us-west-2c",
    )
    assert kit.unavailable.is_unavailable(
        capacity_type=wk.CAPACITY_TYPE_SPOT, instance_type="t3.micro", zone="us-west-2c"
    )


async def test_requests_nothing_fits_are_insufficient_capacity(kit: ProviderKit) -> None:
    with pytest.raises(InsufficientCapacityError, match="no instance type"):
        await kit.provider.create(make_nodeclaim(requests={"cpu": "500"}))
    assert "CreateFleet" not in kit.faults.requests


@pytest.mark.parametrize(
    "missing", [pytest.param(True, id="missing"), pytest.param(False, id="not-ready")]
)
async def test_a_nodeclass_that_is_missing_or_not_ready_is_reported(
    kit: ProviderKit, missing: bool
) -> None:
    if missing:
        kit.nodeclasses.items.clear()
    else:
        nodeclass = ready_nodeclass(kit.moto)
        kit.nodeclasses.put(
            attrs.evolve(nodeclass, status=attrs.evolve(nodeclass.status, conditions=()))
        )
    with pytest.raises(NodeClassNotReadyError, match="'default'"):
        await kit.provider.create(make_nodeclaim())


@pytest.mark.parametrize(
    ("group", "kind"),
    [
        pytest.param(kwoklabels.KWOK_GROUP, "KWOKNodeClass", id="another-providers-class"),
        pytest.param(awslabels.AWS_GROUP, "EC2NodeClassTypo", id="another-kind-of-this-group"),
    ],
)
async def test_a_reference_to_another_kind_of_nodeclass_launches_nothing(
    kit: ProviderKit, group: str, kind: str
) -> None:
    """An EC2NodeClass named like the reference is not the class a foreign reference asks for."""
    foreign = NodeClassReference(group=group, kind=kind, name="default")
    claim = make_nodeclaim()
    claim = attrs.evolve(claim, spec=attrs.evolve(claim.spec, node_class_ref=foreign))
    with pytest.raises(NodeClassNotReadyError, match=f"{group}/{kind} 'default'.*EC2NodeClass"):
        await kit.provider.create(claim)
    pool = NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(requirements=(), node_class_ref=foreign)
            )
        ),
    )
    with pytest.raises(NodeClassNotReadyError, match=f"{group}/{kind}"):
        await kit.provider.get_instance_types(pool)
    assert await kit.provider.is_drifted(claim) is None
    assert "CreateFleet" not in kit.faults.requests


async def test_get_list_and_delete_follow_the_instance(kit: ProviderKit) -> None:
    launched = await kit.provider.create(make_nodeclaim())
    provider_id = launched.status.provider_id
    assert provider_id is not None
    found = await kit.provider.get(provider_id)
    assert found.status.provider_id == provider_id
    assert found.status.image_id == launched.status.image_id
    assert found.metadata.labels[wk.LABEL_NODEPOOL] == "default"
    assert found.metadata.labels[IT] == launched.metadata.labels[IT]
    assert found.metadata.labels[CT] == wk.CAPACITY_TYPE_SPOT
    assert (
        found.metadata.labels[awslabels.LABEL_AWS_ZONE_ID]
        == launched.metadata.labels[awslabels.LABEL_AWS_ZONE_ID]
    )
    assert found.metadata.creation_timestamp is not None
    assert found.status.capacity == launched.status.capacity
    assert [n.status.provider_id for n in await kit.provider.list()] == [provider_id]
    await kit.provider.delete(launched)
    assert "TerminateInstances" in kit.faults.sent
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.get(provider_id)
    assert await kit.provider.list() == ()


async def test_unknown_or_foreign_provider_ids_are_not_found(kit: ProviderKit) -> None:
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.get("aws:///us-west-2a/i-0123456789abcdef0")
    with pytest.raises(NodeClaimNotFoundError, match="not an AWS provider id"):
        await kit.provider.get("kwok://node-1")


async def test_instance_types_only_offer_zones_with_subnets(kit: ProviderKit) -> None:
    pool = NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    requirements=(),
                    node_class_ref=NodeClassReference(
                        group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default"
                    ),
                )
            )
        ),
    )
    types = {t.name: t for t in await kit.provider.get_instance_types(pool)}
    assert set(types) == {"m5.large", "m5.xlarge", "c5.large", "c6g.large", "t3.micro", "m5.metal"}
    for t in types.values():
        assert not any(o.available for o in t.offerings if o.zone == "us-west-2d")
        assert any(o.available for o in t.offerings if o.zone == "us-west-2a")
    spot_2a = next(
        o
        for o in types["c5.large"].offerings
        if o.zone == "us-west-2a" and o.capacity_type == "spot"
    )
    assert spot_2a.price == pytest.approx(SPOT_PRICES["c5.large"])


async def test_a_vanished_launch_template_is_recreated_and_retried_once(kit: ProviderKit) -> None:
    await kit.provider.create(make_nodeclaim(name="first"))
    kit.faults.fail("CreateFleet", "InvalidLaunchTemplateName.NotFoundException", times=1)
    launched = await kit.provider.create(make_nodeclaim(name="second"))
    assert launched.status.provider_id is not None
    # The cache was dropped, so the template was looked up in EC2 again before the retry.
    sent = kit.faults.sent
    fleets = [i for i, op in enumerate(sent) if op == "CreateFleet"]
    assert len(fleets) == 3
    assert "DescribeLaunchTemplates" not in sent[fleets[0] : fleets[1]]  # cached
    assert "DescribeLaunchTemplates" in sent[fleets[1] : fleets[2]]  # cache dropped


@pytest.mark.parametrize(
    ("code", "error", "reason"),
    [
        pytest.param(
            "InsufficientInstanceCapacity", InsufficientCapacityError, None, id="capacity"
        ),
        pytest.param("UnauthorizedOperation", CreateError, "InstanceCreationFailed", id="denied"),
        pytest.param(
            "InvalidParameterValue", CreateError, "InstanceCreationFailed", id="bad-request"
        ),
    ],
)
async def test_fleet_call_failures_become_the_contracts_errors(
    kit: ProviderKit, code: str, error: type[Exception], reason: str | None
) -> None:
    kit.faults.fail("CreateFleet", code)
    with pytest.raises(error) as raised:
        await kit.provider.create(make_nodeclaim())
    assert code in str(raised.value)
    if isinstance(raised.value, CreateError):
        assert raised.value.condition_reason == reason
        assert raised.value.condition_message.startswith(code)
    assert raised.value.__cause__ is not None


async def test_registered_instances_get_the_nodeclaim_and_name_tags(
    kit: ProviderKit, session: AWSSession
) -> None:
    launched = await kit.provider.create(make_nodeclaim(name="tagged-abc"))
    provider_id = launched.status.provider_id or ""
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    added = await instances.tag_registered(
        await instances.get(parse_provider_id(provider_id)),
        nodeclaim="tagged-abc",
        node_name="ip-10-0-1-5.internal",
    )
    # karpenter.sh/nodeclaim and eks:eks-cluster-name were set at launch already.
    assert added == ("Name",)
    (instance,) = await instances.list()
    assert instance.tags["karpenter.sh/nodeclaim"] == "tagged-abc"
    assert instance.tags["Name"] == "ip-10-0-1-5.internal"
    assert (await kit.provider.get(provider_id)).metadata.name == "tagged-abc"


async def test_a_name_from_the_nodeclass_tags_is_never_overwritten(
    kit: ProviderKit, session: AWSSession
) -> None:
    """Seed 003's AWSNodeTemplate names its instances: the Name survives registration."""
    base = ready_nodeclass(kit.moto)
    kit.nodeclasses.put(
        attrs.evolve(
            base,
            spec=attrs.evolve(base.spec, tags={"Name": "karpenter-node", "team": "batch"}),
        )
    )
    launched = await kit.provider.create(make_nodeclaim(name="named-abc"))
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    instance = await instances.get(parse_provider_id(launched.status.provider_id or ""))
    assert instance.tags["Name"] == "karpenter-node"  # carried from the NodeClass at launch
    kit.faults.requests.pop("CreateTags", None)
    added = await instances.tag_registered(
        instance, nodeclaim="named-abc", node_name="ip-10-0-1-7.internal"
    )
    # Name, karpenter.sh/nodeclaim and eks:eks-cluster-name are all there since the launch:
    # nothing to add, and no CreateTags call at all.
    assert added == ()
    assert "CreateTags" not in kit.faults.requests
    after = await instances.get(instance.id)
    assert after.tags["Name"] == "karpenter-node"
    assert after.tags["team"] == "batch"
    assert after.tags["eks:eks-cluster-name"] == kit.cluster.name


async def test_a_security_groups_for_pods_pod_launches_only_trunking_types(
    kit: ProviderKit,
) -> None:
    """A NodeClaim asking for vpc.amazonaws.com/pod-eni is offered to EC2 only on types that can
    trunk ENIs, and comes back with their branch ENIs as capacity."""
    launched = await kit.provider.create(
        make_nodeclaim(requests={"vpc.amazonaws.com/pod-eni": "1", "cpu": "100m"})
    )
    offered = {o["InstanceType"] for o in _overrides(_fleet(kit))}
    assert offered
    assert "t3.micro" not in offered  # no ENI trunking
    assert all(branch_interfaces(t) >= 1 for t in offered)
    chosen = launched.metadata.labels[IT]
    assert launched.status.capacity["vpc.amazonaws.com/pod-eni"] == Quantity(
        str(branch_interfaces(chosen))
    )
    with pytest.raises(InsufficientCapacityError):
        await kit.provider.create(
            make_nodeclaim((IT, "In", ("t3.micro",)), requests={"vpc.amazonaws.com/pod-eni": "1"})
        )


async def test_a_launch_that_cannot_keep_min_values_is_refused(kit: ProviderKit) -> None:
    for zone in ("us-west-2a", "us-west-2b", "us-west-2c"):
        kit.unavailable.mark_unavailable(
            reason="test", capacity_type=wk.CAPACITY_TYPE_SPOT, instance_type="t3.micro", zone=zone
        )
    claim = make_nodeclaim((CT, "In", (wk.CAPACITY_TYPE_SPOT,)))
    claim = attrs.evolve(
        claim,
        spec=attrs.evolve(
            claim.spec,
            requirements=(
                *claim.spec.requirements,
                NodeClaimRequirement(
                    key=IT,
                    operator=RequirementOperator.IN,
                    values=("m5.large", "c5.large", "t3.micro"),
                    min_values=3,
                ),
            ),
        ),
    )
    with pytest.raises(CreateError, match="minValues") as raised:
        await kit.provider.create(claim)
    assert raised.value.condition_reason == "InstanceTypeFilteringFailed"
    assert "CreateFleet" not in kit.faults.requests


async def test_upkeep_deletes_launch_templates_unused_for_a_minute(kit: ProviderKit) -> None:
    await kit.provider.create(make_nodeclaim((IT, "In", ("c5.large",))))
    (config,) = _fleet(kit)["LaunchTemplateConfigs"]
    name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert await kit.provider.maintain() == ()
    kit.clock.step(datetime.timedelta(minutes=1))
    assert await kit.provider.maintain() == (name,)
    assert (
        kit.ec2().describe_launch_templates(
            Filters=[{"Name": "launch-template-name", "Values": [name]}]
        )["LaunchTemplates"]
        == []
    )


async def test_launches_in_flight_count_against_their_subnet(kit: ProviderKit) -> None:
    zone_a = (ZONE, "In", ("us-west-2a",))
    before = kit.faults.sent.count("DescribeSubnets")
    chosen = []
    for i in range(10):
        await kit.provider.create(make_nodeclaim(zone_a, (IT, "In", ("m5.large",)), name=f"b-{i}"))
        chosen.append(_overrides(_fleet(kit))[0]["SubnetId"])
        if chosen[-1] == kit.moto.subnets["a-small"]:
            break
    # The roomy /24 first; then its reserved addresses (29 pods + 1 each) tip the choice.
    assert chosen[0] == kit.moto.subnets["a"]
    assert chosen[-1] == kit.moto.subnets["a-small"]
    assert kit.faults.sent.count("DescribeSubnets") - before == 1  # cached for a minute
    kit.clock.step(datetime.timedelta(minutes=1))
    await kit.provider.create(make_nodeclaim(zone_a, (IT, "In", ("m5.large",)), name="after"))
    assert _overrides(_fleet(kit))[0]["SubnetId"] == kit.moto.subnets["a"]  # EC2's own count


async def test_a_subnet_out_of_addresses_is_left_out_until_the_next_refresh(
    kit: ProviderKit,
) -> None:
    zone_a = (ZONE, "In", ("us-west-2a",))
    c5 = (IT, "In", ("c5.large",))
    kit.faults.ice("c5.large", "us-west-2a", code="InsufficientFreeAddressesInSubnet")
    with pytest.raises(InsufficientCapacityError):
        await kit.provider.create(make_nodeclaim(zone_a, c5, name="full"))
    assert _overrides(_fleet(kit))[0]["SubnetId"] == kit.moto.subnets["a"]
    kit.faults.ice_offerings.clear()
    # Another type in the same zone: its offering is fine, the subnet is not.
    m5 = (IT, "In", ("m5.large",))
    await kit.provider.create(make_nodeclaim(zone_a, m5, name="elsewhere"))
    assert _overrides(_fleet(kit))[0]["SubnetId"] == kit.moto.subnets["a-small"]
    kit.clock.step(datetime.timedelta(minutes=1))  # subnets refreshed: EC2's word again
    await kit.provider.create(make_nodeclaim(zone_a, m5, name="back"))
    assert _overrides(_fleet(kit))[0]["SubnetId"] == kit.moto.subnets["a"]


async def test_a_launch_repeated_for_one_nodeclaim_makes_one_instance(kit: ProviderKit) -> None:
    """A launch retried after a crash (the instance made, its providerID never written) gets
    the instance it already has: CreateFleet carries a client token from the NodeClaim's UID,
    and EC2 (the emulator too) answers a repeated token with the first fleet."""
    claim = make_nodeclaim()
    claim = attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, uid="3f0c0d4e-uid"))
    first = await kit.provider.create(claim)
    again = await kit.provider.create(claim)
    assert _fleet(kit)["ClientToken"] == "karpy-3f0c0d4e-uid"
    assert again.status.provider_id == first.status.provider_id
    assert [n.status.provider_id for n in await kit.provider.list()] == [first.status.provider_id]
    other = make_nodeclaim(name="default-fghij")
    other = attrs.evolve(other, metadata=attrs.evolve(other.metadata, uid="another-uid"))
    second = await kit.provider.create(other)
    assert second.status.provider_id != first.status.provider_id
    assert len(await kit.provider.list()) == 2
