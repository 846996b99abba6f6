"""EFA on moto: a NodeClaim that asks for ``vpc.amazonaws.com/efa`` lands on a type that has it,
with one EFA interface per network card the type takes in its launch template; a NodeClass that
lists its own interfaces gets exactly those, on types with the cards for them."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.cloudprovider import InsufficientCapacityError, NodeClassNotReadyError
from karpy.core.resources import parse_quantity
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass_network import ConnectionTracking, InterfaceType, NetworkInterface
from karpy_aws.session import AWSSession

from .conftest import (
    SPOT_PRICES,
    FaultInjector,
    Moto,
    ProviderKit,
    build_kit,
    make_nodeclaim,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws

EFA = "vpc.amazonaws.com/efa"
# c5n.18xlarge: one network card, one EFA interface; c6in.32xlarge: two of each.
EFA_TYPES = {"c5n.18xlarge": 1.2, "c6in.32xlarge": 2.0}


@pytest.fixture
async def efa_kit(session: AWSSession, faults: FaultInjector, moto: Moto) -> ProviderKit:
    return await build_kit(session, faults, moto, spot_prices={**SPOT_PRICES, **EFA_TYPES})


def _templates(kit: ProviderKit) -> dict[str, dict[str, Any]]:
    """Launch template data (from moto) of the last CreateFleet, by the types each serves."""
    out = {}
    for config in kit.faults.requests["CreateFleet"][-1]["LaunchTemplateConfigs"]:
        name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
        data = kit.ec2().describe_launch_template_versions(LaunchTemplateName=name)
        types = ",".join(sorted({o["InstanceType"] for o in config["Overrides"]}))
        out[types] = data["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return out


async def test_an_efa_request_gets_every_efa_interface_its_type_takes(
    efa_kit: ProviderKit,
) -> None:
    efa_kit.nodeclasses.put(
        ready_nodeclass(
            efa_kit.moto,
            ip_prefix_count=1,
            connection_tracking=ConnectionTracking(tcp_established_timeout=600),
        )
    )
    launched = await efa_kit.provider.create(make_nodeclaim(requests={EFA: "1"}))
    assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] in EFA_TYPES
    assert launched.status.capacity[EFA] in ("1", "2")
    templates = _templates(efa_kit)
    assert set(templates) == {"c5n.18xlarge", "c6in.32xlarge"}
    groups = [efa_kit.moto.security_groups["nodes"]]
    one = templates["c5n.18xlarge"]["NetworkInterfaces"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in one] == [
        (0, 0, "efa")
    ]
    two = templates["c6in.32xlarge"]["NetworkInterfaces"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in two] == [
        (0, 0, "efa"),
        (1, 1, "efa"),
    ]
    for interface in (*one, *two):
        assert interface["Groups"] == groups
        assert interface["Ipv4PrefixCount"] == 1
    # Connection tracking belongs to the primary interface only.
    assert [("ConnectionTrackingSpecification" in i) for i in two] == [True, False]
    assert "SecurityGroupIds" not in templates["c6in.32xlarge"]


async def test_without_an_efa_request_no_efa_interface_is_attached(
    efa_kit: ProviderKit,
) -> None:
    await efa_kit.provider.create(
        make_nodeclaim((wk.LABEL_INSTANCE_TYPE, "In", ("c6in.32xlarge",)))
    )
    (data,) = _templates(efa_kit).values()
    assert "NetworkInterfaces" not in data
    assert data["SecurityGroupIds"] == [efa_kit.moto.security_groups["nodes"]]


async def test_listed_interfaces_are_attached_on_types_with_the_cards(
    efa_kit: ProviderKit,
) -> None:
    interfaces = (
        NetworkInterface(
            network_card_index=0, device_index=0, interface_type=InterfaceType.INTERFACE
        ),
        NetworkInterface(
            network_card_index=1, device_index=0, interface_type=InterfaceType.EFA_ONLY
        ),
    )
    efa_kit.nodeclasses.put(
        ready_nodeclass(efa_kit.moto, network_interfaces=interfaces, ip_prefix_count=2)
    )
    pool_types = await efa_kit.provider.get_instance_types(_pool())
    # Only c6in.32xlarge has a second network card (and EFA on it).
    assert {t.name for t in pool_types} == {"c6in.32xlarge"}
    launched = await efa_kit.provider.create(make_nodeclaim())
    assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "c6in.32xlarge"
    (data,) = _templates(efa_kit).values()
    groups = [efa_kit.moto.security_groups["nodes"]]
    assert data["NetworkInterfaces"] == [
        {
            "NetworkCardIndex": 0,
            "DeviceIndex": 0,
            "InterfaceType": "interface",
            "Groups": groups,
            "Ipv4PrefixCount": 2,
        },
        {"NetworkCardIndex": 1, "DeviceIndex": 0, "InterfaceType": "efa-only", "Groups": groups},
    ]


async def test_listed_interfaces_offer_only_the_efa_they_attach(efa_kit: ProviderKit) -> None:
    primary = NetworkInterface(
        network_card_index=0, device_index=0, interface_type=InterfaceType.INTERFACE
    )
    efa_kit.nodeclasses.put(ready_nodeclass(efa_kit.moto, network_interfaces=(primary,)))
    types = {t.name: t for t in await efa_kit.provider.get_instance_types(_pool())}
    # c6in.32xlarge takes two EFA interfaces, but this class attaches none: it offers none.
    assert EFA not in types["c6in.32xlarge"].capacity
    with pytest.raises(InsufficientCapacityError):
        await efa_kit.provider.create(make_nodeclaim(requests={EFA: "1"}))
    one_efa = (
        primary,
        NetworkInterface(
            network_card_index=1, device_index=0, interface_type=InterfaceType.EFA_ONLY
        ),
    )
    efa_kit.nodeclasses.put(ready_nodeclass(efa_kit.moto, network_interfaces=one_efa))
    types = {t.name: t for t in await efa_kit.provider.get_instance_types(_pool())}
    assert types["c6in.32xlarge"].capacity[EFA] == parse_quantity("1")


async def test_listed_interfaces_without_a_primary_one_are_refused(
    efa_kit: ProviderKit,
) -> None:
    only_efa = (
        NetworkInterface(
            network_card_index=0, device_index=0, interface_type=InterfaceType.EFA_ONLY
        ),
    )
    efa_kit.nodeclasses.put(ready_nodeclass(efa_kit.moto, network_interfaces=only_efa))
    with pytest.raises(NodeClassNotReadyError, match=r"spec\.networkInterfaces: needs exactly"):
        await efa_kit.provider.create(make_nodeclaim())
    assert "CreateFleet" not in efa_kit.faults.requests


def _pool() -> NodePool:
    return NodePool(
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
