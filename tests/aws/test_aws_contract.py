"""The shared CloudProvider conformance suite (tests/contract), run against AWSCloudProvider on
moto. The suite's tests are imported here and get this module's ``subject``: the provider of
the ``kit`` fixture with a Ready EC2NodeClass whose subnets cover all four zones."""

from __future__ import annotations

import attrs
import pytest

from karpy.apis.v1.common import NodeClassReference
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import ec2nodeclass_status as nc_status
from karpy_aws.apis import labels as awslabels
from tests.contract.conftest import Subject, nodepool
from tests.contract.test_cloudprovider_contract import (
    test_a_fresh_instance_has_not_drifted,
    test_create_fits_the_requests,
    test_create_honours_requirements,
    test_create_launches_the_cheapest_available_offering,
    test_create_reports_what_it_launched,
    test_delete_ends_in_not_found,
    test_get_and_list_see_the_launched_instance,
    test_get_of_an_unknown_instance_is_not_found,
    test_instance_types_are_well_formed,
    test_it_is_a_cloud_provider,
    test_unsatisfiable_nodeclaims_get_insufficient_capacity,
    test_well_known_labels_are_the_providers_own,
)

from .conftest import DISCOVERY, ProviderKit, ready_nodeclass

pytestmark = pytest.mark.aws

__all__ = [
    "test_a_fresh_instance_has_not_drifted",
    "test_create_fits_the_requests",
    "test_create_honours_requirements",
    "test_create_launches_the_cheapest_available_offering",
    "test_create_reports_what_it_launched",
    "test_delete_ends_in_not_found",
    "test_get_and_list_see_the_launched_instance",
    "test_get_of_an_unknown_instance_is_not_found",
    "test_instance_types_are_well_formed",
    "test_it_is_a_cloud_provider",
    "test_unsatisfiable_nodeclaims_get_insufficient_capacity",
    "test_well_known_labels_are_the_providers_own",
]


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
