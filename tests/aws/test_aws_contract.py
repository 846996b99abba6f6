"""The shared CloudProvider conformance suite (tests/contract), run against AWSCloudProvider on
moto. Every test of the suite is taken into this module by name (a new one runs here without
being listed) and gets this module's ``subject``: the provider of the ``kit`` fixture with a
Ready EC2NodeClass whose subnets cover all four zones."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

from karpy.apis.v1.common import NodeClassReference
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import ec2nodeclass_status as nc_status
from karpy_aws.apis import labels as awslabels
from tests.contract import test_cloudprovider_contract as contract
from tests.contract.conftest import Subject, nodepool

from .conftest import DISCOVERY, ProviderKit, ready_nodeclass

pytestmark = pytest.mark.aws


def _contract_tests() -> dict[str, Any]:
    """Every test of the contract suite, by name."""
    return {
        name: test
        for name, test in vars(contract).items()
        if name.startswith("test_") and inspect.isfunction(test)
    }


# Every contract test, whatever its name: one added to the suite runs here too.
globals().update(_contract_tests())


def test_every_contract_test_is_collected_here(request: pytest.FixtureRequest) -> None:
    """A contract test that stopped running against AWS (shadowed here, say) fails this."""
    module = request.node.getparent(pytest.Module)
    assert module is not None
    collected = {
        item.originalname for item in module.collect() if isinstance(item, pytest.Function)
    }
    expected = set(_contract_tests())
    assert expected, "the contract suite has no tests"
    assert not expected - collected, sorted(expected - collected)


@pytest.fixture
def subject(kit: ProviderKit) -> Subject:
    name = "contract"
    nodeclass = ready_nodeclass(
        kit.moto,
        name=name,
        subnet_selector_terms=(
            nc.SubnetSelectorTerm(tags=DISCOVERY),
            nc.SubnetSelectorTerm(tags={"karpy-test/extra": "d"}),
        ),
    )
    zone_d = nc_status.Subnet(id=kit.moto.subnets["d"], zone="us-west-2d")
    status = attrs.evolve(nodeclass.status, subnets=(*nodeclass.status.subnets, zone_d))
    kit.nodeclasses.put(attrs.evolve(nodeclass, status=status))
    ref = NodeClassReference(group=awslabels.AWS_GROUP, kind="EC2NodeClass", name=name)
    return Subject(
        provider=kit.provider,
        nodepool=nodepool("contract-pool", ref),
        node_class_ref=ref,
        missing_provider_id="aws:///us-west-2a/i-0123456789abcdef0",
    )
