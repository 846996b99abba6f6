"""Choosing what to launch for a NodeClaim, and describing the launched NodeClaim.

Every provider's ``create`` does the same two things around its own launch call: pick the
cheapest available offering, among the NodeClaim's compatible instance types, that holds its
requested resources; then return the NodeClaim labelled with what was chosen and carrying the
type's capacity and allocatable. Doing it once here gives the fake, kwok and any simpler provider
one meaning for "compatible" (Karpenter's: every key both sides define must intersect; offerings
must match the zone and capacity-type requirements; requests must fit allocatable).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.requirements import (
    quantities_from_resources,
    requirements_from_api,
    resources_from_quantities,
)
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.requirements import Requirements
from karpy.core.resources import Resources


@attrs.frozen
class Launch:
    """One instance type bought through one of its offerings."""

    instance_type: InstanceType
    offering: Offering


def nodeclaim_requirements(nodeclaim: NodeClaim) -> Requirements:
    """The NodeClaim's spec.requirements as core Requirements (RequirementError names the entry)."""
    return requirements_from_api(nodeclaim.spec.requirements)


def nodeclaim_requests(nodeclaim: NodeClaim) -> Resources:
    """The NodeClaim's spec.resources.requests (QuantityError names the resource)."""
    return resources_from_quantities(
        nodeclaim.spec.resources.requests, field="spec.resources.requests"
    )


def compatible_launches(
    nodeclaim: NodeClaim, instance_types: Iterable[InstanceType]
) -> list[Launch]:
    """Every (type, available offering) pair that can serve the NodeClaim, cheapest first
    (ties broken by type name, zone and capacity type, so the choice is deterministic)."""
    reqs = nodeclaim_requirements(nodeclaim)
    requests = nodeclaim_requests(nodeclaim)
    launches = [
        Launch(it, offering)
        for it in instance_types
        if reqs.conflict(it.requirements) is None and requests.fits(it.allocatable)
        for offering in it.offerings
        if offering.available and offering.matches(reqs)
    ]
    launches.sort(key=_launch_order)
    return launches


def _launch_order(launch: Launch) -> tuple[float, str, str, str]:
    offering = launch.offering
    return (offering.price, launch.instance_type.name, offering.zone, offering.capacity_type)


def cheapest_launch(nodeclaim: NodeClaim, instance_types: Iterable[InstanceType]) -> Launch | None:
    """The cheapest compatible launch, or None when nothing can serve the NodeClaim."""
    launches = compatible_launches(nodeclaim, instance_types)
    return launches[0] if launches else None


def launched_labels(nodeclaim: NodeClaim, launch: Launch) -> dict[str, str]:
    """The labels a node launched this way carries: the NodeClaim's own labels and single-valued
    requirements, the instance type's fixed labels (arch, os, ...), and the chosen instance
    type, zone and capacity type."""
    out = dict(nodeclaim.metadata.labels)
    out.update(nodeclaim_requirements(nodeclaim).labels())
    out.update(launch.instance_type.requirements.labels())
    out[wk.LABEL_INSTANCE_TYPE] = launch.instance_type.name
    out[wk.LABEL_TOPOLOGY_ZONE] = launch.offering.zone
    out[wk.LABEL_CAPACITY_TYPE] = launch.offering.capacity_type
    out.pop(wk.LABEL_HOSTNAME, None)
    return out


def launched_nodeclaim(
    nodeclaim: NodeClaim, launch: Launch, *, provider_id: str, image_id: str | None = None
) -> NodeClaim:
    """The NodeClaim as launched: labels of the choice, providerID, capacity and allocatable."""
    status = attrs.evolve(
        nodeclaim.status,
        provider_id=provider_id,
        image_id=image_id,
        capacity=quantities_from_resources(launch.instance_type.capacity),
        allocatable=quantities_from_resources(launch.instance_type.allocatable),
    )
    metadata = attrs.evolve(nodeclaim.metadata, labels=launched_labels(nodeclaim, launch))
    return attrs.evolve(nodeclaim, metadata=metadata, status=status)
