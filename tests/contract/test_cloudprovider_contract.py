"""The CloudProvider contract, run against every provider (see conftest.py's ``subject``).

What a controller may rely on whichever provider is configured: create launches the cheapest
compatible available offering and reports it in labels and status; unsatisfiable NodeClaims get
InsufficientCapacityError; get/list see what was launched; delete ends in NodeClaimNotFoundError;
instance types are well formed, and the labels they carry besides karpy's are the provider's
well-known labels.
"""

from __future__ import annotations

import pytest

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import CloudProvider, InsufficientCapacityError, NodeClaimNotFoundError
from karpy.cloudprovider.requirements import resources_from_quantities
from karpy.core.instancetypes import InstanceType
from karpy.core.requirements import Requirements
from karpy.core.resources import CPU, MEMORY, PODS
from tests.contract.conftest import Subject, requirement
from tests.support.waiting import eventually


async def _types(subject: Subject) -> dict[str, InstanceType]:
    return {it.name: it for it in await subject.provider.get_instance_types(subject.nodepool)}


def _price(types: dict[str, InstanceType], launched: NodeClaim) -> float:
    labels = launched.metadata.labels
    it = types[labels[wk.LABEL_INSTANCE_TYPE]]
    (offering,) = [
        o
        for o in it.offerings
        if o.zone == labels[wk.LABEL_TOPOLOGY_ZONE]
        and o.capacity_type == labels[wk.LABEL_CAPACITY_TYPE]
    ]
    assert offering.available
    return offering.price


def _cheapest(types: dict[str, InstanceType], reqs: Requirements) -> float:
    return min(
        o.price
        for it in types.values()
        if reqs.conflict(it.requirements) is None
        for o in it.offerings
        if o.available and o.matches(reqs)
    )


async def test_it_is_a_cloud_provider(subject: Subject) -> None:
    provider = subject.provider
    assert isinstance(provider, CloudProvider)
    assert provider.name
    kinds = {(k.group, k.kind) for k in provider.supported_node_classes()}
    assert (subject.node_class_ref.group, subject.node_class_ref.kind) in kinds
    assert all(p.toleration.total_seconds() > 0 for p in provider.repair_policies())


async def test_well_known_labels_are_the_providers_own(subject: Subject) -> None:
    """The labels a provider declares well known are its own, none of karpy's, and every label
    its instance types carry besides karpy's is among them (so a pod may select it)."""
    own = subject.provider.well_known_labels()
    assert own.isdisjoint(wk.WELL_KNOWN_LABELS)
    for it in await subject.provider.get_instance_types(subject.nodepool):
        extra = set(it.requirements.keys()) - wk.WELL_KNOWN_LABELS
        assert extra <= own, (it.name, sorted(extra - own))


async def test_instance_types_are_well_formed(subject: Subject) -> None:
    listed = await subject.provider.get_instance_types(subject.nodepool)
    assert listed
    assert len({it.name for it in listed}) == len(listed)
    for it in listed:
        assert it.requirements.single_value(wk.LABEL_INSTANCE_TYPE) == it.name
        assert it.offerings, it.name
        assert all(o.price >= 0 for o in it.offerings), it.name
        assert it.allocatable.fits(it.capacity), it.name
        assert {CPU, MEMORY, PODS} <= set(it.capacity), it.name


async def test_create_launches_the_cheapest_available_offering(subject: Subject) -> None:
    types = await _types(subject)
    launched = await subject.provider.create(subject.nodeclaim("cheapest"))
    assert _price(types, launched) == _cheapest(types, Requirements())


async def test_create_reports_what_it_launched(subject: Subject) -> None:
    nodeclaim = subject.nodeclaim("status")
    launched = await subject.provider.create(nodeclaim)
    assert launched.metadata.name == nodeclaim.metadata.name
    assert launched.spec == nodeclaim.spec
    assert launched.status.provider_id
    labels = launched.metadata.labels
    assert labels[wk.LABEL_NODEPOOL] == subject.nodepool.metadata.name
    for key in (wk.LABEL_INSTANCE_TYPE, wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE):
        assert labels.get(key), key
    it = (await _types(subject))[labels[wk.LABEL_INSTANCE_TYPE]]
    capacity = resources_from_quantities(launched.status.capacity)
    allocatable = resources_from_quantities(launched.status.allocatable)
    assert capacity == it.capacity
    assert allocatable == it.allocatable


async def test_create_honours_requirements(subject: Subject) -> None:
    types = await _types(subject)
    zones = sorted({o.zone for it in types.values() for o in it.offerings})
    zone = zones[-1]
    reqs = (
        requirement(wk.LABEL_CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND),
        requirement(wk.LABEL_TOPOLOGY_ZONE, zone),
    )
    launched = await subject.provider.create(subject.nodeclaim("honours", *reqs))
    labels = launched.metadata.labels
    assert labels[wk.LABEL_CAPACITY_TYPE] == wk.CAPACITY_TYPE_ON_DEMAND
    assert labels[wk.LABEL_TOPOLOGY_ZONE] == zone
    core = Requirements.from_labels(
        {wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND, wk.LABEL_TOPOLOGY_ZONE: zone}
    )
    assert _price(types, launched) == _cheapest(types, core)


async def test_create_fits_the_requests(subject: Subject) -> None:
    types = await _types(subject)
    biggest = max(types.values(), key=lambda it: (it.allocatable.get_amount(CPU), it.name))
    cpu = biggest.allocatable.get_amount(CPU)
    launched = await subject.provider.create(subject.nodeclaim("fits", requests={CPU: f"{cpu}m"}))
    allocatable = resources_from_quantities(launched.status.allocatable)
    assert allocatable.get_amount(CPU) >= cpu


@pytest.mark.parametrize(
    "case",
    [pytest.param("no-such-type", id="unknown-type"), pytest.param("too-big", id="too-big")],
)
async def test_unsatisfiable_nodeclaims_get_insufficient_capacity(
    subject: Subject, case: str
) -> None:
    if case == "no-such-type":
        nodeclaim = subject.nodeclaim("ice", requirement(wk.LABEL_INSTANCE_TYPE, "no-such-type"))
    else:
        nodeclaim = subject.nodeclaim("ice", requests={CPU: "100000"})
    with pytest.raises(InsufficientCapacityError):
        await subject.provider.create(nodeclaim)
    assert all(nc.metadata.name != nodeclaim.metadata.name for nc in await subject.provider.list())


async def test_get_and_list_see_the_launched_instance(subject: Subject) -> None:
    launched = await subject.provider.create(subject.nodeclaim("seen"))
    provider_id = launched.status.provider_id
    assert provider_id is not None
    found = await subject.provider.get(provider_id)
    assert found.status.provider_id == provider_id
    for key in (wk.LABEL_INSTANCE_TYPE, wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE):
        assert found.metadata.labels[key] == launched.metadata.labels[key]
    assert provider_id in {nc.status.provider_id for nc in await subject.provider.list()}


async def test_get_of_an_unknown_instance_is_not_found(subject: Subject) -> None:
    with pytest.raises(NodeClaimNotFoundError):
        await subject.provider.get(subject.missing_provider_id)


async def test_delete_ends_in_not_found(subject: Subject) -> None:
    launched = await subject.provider.create(subject.nodeclaim("gone"))
    provider_id = launched.status.provider_id
    assert provider_id is not None

    async def gone() -> bool:
        try:
            await subject.provider.delete(launched)
        except NodeClaimNotFoundError:
            return True
        return False

    assert await eventually(gone, within=30)
    with pytest.raises(NodeClaimNotFoundError):
        await subject.provider.get(provider_id)
    assert provider_id not in {nc.status.provider_id for nc in await subject.provider.list()}


async def test_a_fresh_instance_has_not_drifted(subject: Subject) -> None:
    launched = await subject.provider.create(subject.nodeclaim("fresh"))
    assert await subject.provider.is_drifted(launched) is None
