"""Which instance types, zones, subnets and AMIs one NodeClaim's CreateFleet asks for.

Karpenter decides the whole fleet request before calling EC2: filter the instance types by the
NodeClaim's requirements, resources and available offerings; choose the capacity type (reserved,
then spot, then on-demand); drop spot types dearer than the cheapest on-demand one and exotic
types (metal, GPUs, accelerators) unless nothing else fits; keep the 60 cheapest; give each type
its AMI; and cross types with zones, each zone on its subnet with the most free addresses. All
of that is here, pure (values in, a LaunchPlan out), so it is tested without EC2 and moto only
has to carry the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import PODS, Resources
from karpy_aws.apis import ec2nodeclass_status as nodeclass_status
from karpy_aws.apis import labels as awslabels
from karpy_aws.providers.instancetype.coretypes import to_core_instance_type
from karpy_aws.providers.instancetype.instancetypes import EFA
from karpy_aws.providers.instancetype.offerings import AWSInstanceType, Offering
from karpy_aws.providers.network import Subnet

MAX_INSTANCE_TYPES: Final = 60
INSTANCE_TYPE_FLEXIBILITY_THRESHOLD: Final = 5
# Labels an instance type defines that a NodeClaim need not mention.
ALLOW_UNDEFINED: Final = wk.WELL_KNOWN_LABELS | awslabels.AWS_WELL_KNOWN_LABELS
CAPACITY_TYPE_PREFERENCE: Final = (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT)
CAPACITY_BLOCK: Final = "capacity-block"


@attrs.frozen
class Candidate:
    """An instance type a NodeClaim could launch as: the AWS view and the scheduler's view."""

    aws: AWSInstanceType
    core: InstanceType

    @property
    def name(self) -> str:
        return self.aws.name

    @property
    def exotic(self) -> bool:
        """Metal, GPU or accelerator types: launched only when nothing plainer fits."""
        info = self.aws.info
        return info.bare_metal or info.gpu_count > 0 or info.accelerator_count > 0


def restrict_to_zones(
    instance_types: Iterable[AWSInstanceType], zones: frozenset[str]
) -> tuple[AWSInstanceType, ...]:
    """Mark offerings in zones the NodeClass has no subnet in as unavailable (as Karpenter's
    offerings do): nothing can launch there."""
    return tuple(
        attrs.evolve(
            it,
            offerings=tuple(
                attrs.evolve(o, available=o.available and o.zone in zones) for o in it.offerings
            ),
        )
        for it in instance_types
    )


def as_candidates(instance_types: Iterable[AWSInstanceType]) -> tuple[Candidate, ...]:
    """Pair each type with its scheduler view (the costly part; callers cache the result)."""
    return tuple(Candidate(it, to_core_instance_type(it)) for it in instance_types)


def compatible_candidates(
    candidates: Iterable[Candidate], requirements: Requirements, requests: Resources
) -> tuple[Candidate, ...]:
    """Types whose labels meet ``requirements``, with an available offering they allow, and
    whose allocatable fits ``requests`` (Karpenter's resolveInstanceTypes)."""
    out = []
    for candidate in candidates:
        core = candidate.core
        if requirements.compatible(core.requirements, allow_undefined=ALLOW_UNDEFINED):
            continue
        if not any(o.available and o.matches(requirements) for o in core.offerings):
            continue
        if requests.fits(core.allocatable):
            out.append(candidate)
    return tuple(out)


def _allows(requirements: Requirements, capacity_type: str) -> bool:
    allowed = requirements.get(wk.LABEL_CAPACITY_TYPE)
    return allowed is None or allowed.has(capacity_type)


def choose_capacity_type(candidates: Sequence[Candidate], requirements: Requirements) -> str:
    """reserved if allowed and offered, else spot if allowed and offered, else on-demand."""
    for capacity_type in CAPACITY_TYPE_PREFERENCE:
        if not _allows(requirements, capacity_type):
            continue
        pinned = requirements.add(
            Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset({capacity_type}))
        )
        if any(o.available and o.matches(pinned) for c in candidates for o in c.core.offerings):
            return capacity_type
    return wk.CAPACITY_TYPE_ON_DEMAND


def on_demand_fallback_warning(
    capacity_type: str, requirements: Requirements, candidates: Sequence[Candidate]
) -> bool:
    """True when on-demand was chosen although spot was allowed, with fewer than 5 types to
    choose from: Karpenter warns, because spot would need more flexibility to be found."""
    return (
        capacity_type == wk.CAPACITY_TYPE_ON_DEMAND
        and _allows(requirements, wk.CAPACITY_TYPE_SPOT)
        and len({c.name for c in candidates}) < INSTANCE_TYPE_FLEXIBILITY_THRESHOLD
    )


def launch_offerings(
    candidate: Candidate, requirements: Requirements, *, capacity_type: str
) -> tuple[Offering, ...]:
    """The candidate's available offerings of ``capacity_type`` in zones the NodeClaim allows,
    cheapest first."""
    zone = requirements.get(wk.LABEL_TOPOLOGY_ZONE)
    return tuple(
        sorted(
            (
                o
                for o in candidate.aws.offerings
                if o.available
                and o.capacity_type == capacity_type
                and (zone is None or zone.has(o.zone))
            ),
            key=lambda o: (o.price, o.zone),
        )
    )


def _cheapest(offers: Sequence[Offering]) -> float:
    return min((o.price for o in offers), default=float("inf"))


def _drop_unwanted(
    usable: list[Candidate], requirements: Requirements, *, capacity_type: str
) -> list[Candidate]:
    if capacity_type == wk.CAPACITY_TYPE_SPOT:
        cheapest_on_demand = min(
            (
                _cheapest(
                    launch_offerings(c, requirements, capacity_type=wk.CAPACITY_TYPE_ON_DEMAND)
                )
                for c in usable
            ),
            default=float("inf"),
        )
        usable = [
            c
            for c in usable
            if _cheapest(launch_offerings(c, requirements, capacity_type=capacity_type))
            <= cheapest_on_demand
        ]
    plain = [c for c in usable if not c.exotic]
    return plain or usable


def filter_for_launch(
    candidates: Sequence[Candidate], requirements: Requirements, *, capacity_type: str
) -> tuple[Candidate, ...]:
    """Karpenter's pre-launch filters, then the ``MAX_INSTANCE_TYPES`` cheapest (by price of
    the offerings the launch may use; ties by name). As in Karpenter, the unwanted-spot and
    exotic filters are skipped when a requirement carries minValues: they could leave fewer
    distinct values than the NodeClaim was promised."""
    usable = [
        c for c in candidates if launch_offerings(c, requirements, capacity_type=capacity_type)
    ]
    if not any(r.min_values for r in requirements):
        usable = _drop_unwanted(usable, requirements, capacity_type=capacity_type)
    ranked = sorted(
        usable,
        key=lambda c: (
            _cheapest(launch_offerings(c, requirements, capacity_type=capacity_type)),
            c.name,
        ),
    )
    return tuple(ranked[:MAX_INSTANCE_TYPES])


def min_values_shortfall(candidates: Sequence[Candidate], requirements: Requirements) -> str | None:
    """Why the launch's instance types leave fewer distinct values of some key than its
    minValues asks for (Karpenter refuses such a launch), or None when every minimum holds."""
    for req in requirements:
        if not req.min_values:
            continue
        values: set[str] = set()
        for candidate in candidates:
            own = candidate.core.requirements.get(req.key)
            if own is not None and not own.complement:
                values.update(v for v in own.values if req.has(v))
        if len(values) < req.min_values:
            return (
                f"requirement {req.key!r} needs at least {req.min_values} values (minValues), "
                f"the launchable instance types offer {len(values)}: {sorted(values)}"
            )
    return None


def ami_requirements(ami: nodeclass_status.AMI) -> Requirements:
    """An AMI's requirements from the NodeClass status (arch, accelerators, ...)."""
    return Requirements(Requirement.new(r.key, r.operator, r.values) for r in ami.requirements)


def ami_for(
    candidate: Candidate, amis: Sequence[nodeclass_status.AMI]
) -> nodeclass_status.AMI | None:
    """The first AMI (the status lists the preferred first) whose requirements the type meets."""
    for ami in amis:
        if candidate.core.requirements.compatible(ami_requirements(ami)) is None:
            return ami
    return None


@attrs.frozen(kw_only=True)
class Override:
    """One CreateFleet override: an instance type in a zone, on that zone's subnet."""

    instance_type: str
    zone: str
    zone_id: str
    subnet_id: str
    image_id: str
    price: float


GroupKey = tuple[str, int, int, str | None]
"""(AMI, max pods, EFA interfaces, capacity reservation): one launch template each."""


@attrs.frozen(kw_only=True)
class LaunchGroup:
    """Instance types sharing one launch template: same AMI, same max pods, for a NodeClaim
    that asks for EFA the same number of EFA interfaces (each type gets all it can take) and,
    for a ``reserved`` launch, the same capacity reservation."""

    image_id: str
    max_pods: int
    overrides: tuple[Override, ...]
    efa_count: int = 0
    capacity_reservation_id: str | None = None
    """The reservation a ``reserved`` launch's template targets (one template each)."""
    capacity_reservation_type: str | None = None

    @property
    def key(self) -> GroupKey:
        """What tells this group's launch template from the others' of one launch."""
        return (self.image_id, self.max_pods, self.efa_count, self.capacity_reservation_id)


@attrs.frozen(kw_only=True)
class LaunchPlan:
    """Everything CreateFleet needs besides launch template names and tags."""

    capacity_type: str
    groups: tuple[LaunchGroup, ...]
    candidates: tuple[Candidate, ...]

    @property
    def capacity_block(self) -> bool:
        """A reserved launch into capacity blocks (EC2's ``capacity-block`` market)."""
        return any(g.capacity_reservation_type == CAPACITY_BLOCK for g in self.groups)

    def candidate(self, instance_type: str, *, zone: str) -> Candidate | None:
        """The candidate EC2 launched (by name; the arch is the one its AMI was chosen for)."""
        for group in self.groups:
            for override in group.overrides:
                if override.instance_type == instance_type and override.zone == zone:
                    return next(c for c in self.candidates if c.name == instance_type)
        return None

    def override(self, instance_type: str, *, zone: str) -> Override | None:
        group = self.group(instance_type, zone=zone)
        if group is None:
            return None
        return next(
            o for o in group.overrides if o.instance_type == instance_type and o.zone == zone
        )

    def group(self, instance_type: str, *, zone: str) -> LaunchGroup | None:
        """The first group with an override for ``instance_type`` in ``zone`` (the one EC2
        launched from: a reserved launch's groups each hold one reservation's type and zone)."""
        for group in self.groups:
            for override in group.overrides:
                if override.instance_type == instance_type and override.zone == zone:
                    return group
        return None


def plan_launch(
    candidates: Sequence[Candidate],
    requirements: Requirements,
    *,
    capacity_type: str,
    subnets: Mapping[str, Subnet],
    amis: Sequence[nodeclass_status.AMI],
    efa: bool = False,
) -> LaunchPlan:
    """Group the launchable types by (AMI, max pods, EFA interfaces) and cross each with its
    zones.

    ``subnets`` maps zone -> the subnet a launch uses there (network.subnet_per_zone). With
    ``efa`` (the NodeClaim requests ``vpc.amazonaws.com/efa``) each type's template attaches as
    many EFA interfaces as the type takes, as Karpenter does. Groups and their overrides are
    ordered cheapest first, so an EC2 that takes the first override (moto) still takes the
    cheapest.
    """
    chosen = filter_for_launch(candidates, requirements, capacity_type=capacity_type)
    groups: dict[GroupKey, list[Override]] = {}
    reservation_types: dict[str | None, str | None] = {None: None}
    kept: list[Candidate] = []
    for candidate in chosen:
        ami = ami_for(candidate, amis)
        if ami is None:
            continue
        pods = candidate.aws.capacity.get(PODS, 0)
        efa_count = candidate.aws.capacity.get(EFA, 0) if efa else 0
        launched = False
        for o in launch_offerings(candidate, requirements, capacity_type=capacity_type):
            if o.zone not in subnets:
                continue
            override = Override(
                instance_type=candidate.name,
                zone=o.zone,
                zone_id=o.zone_id,
                subnet_id=subnets[o.zone].id,
                image_id=ami.id,
                price=o.price,
            )
            groups.setdefault((ami.id, pods, efa_count, o.reservation_id), []).append(override)
            reservation_types[o.reservation_id] = o.reservation_type
            launched = True
        if launched:
            kept.append(candidate)
    ordered = sorted(
        (
            LaunchGroup(
                image_id=image_id,
                max_pods=pods,
                efa_count=efa_count,
                capacity_reservation_id=reservation,
                capacity_reservation_type=reservation_types[reservation],
                overrides=tuple(sorted(ovs, key=lambda o: (o.price, o.instance_type, o.zone))),
            )
            for (image_id, pods, efa_count, reservation), ovs in groups.items()
        ),
        key=lambda g: (
            g.overrides[0].price,
            g.image_id,
            g.max_pods,
            g.efa_count,
            g.capacity_reservation_id or "",
        ),
    )
    if ordered and ordered[0].capacity_reservation_id is not None:
        # One fleet launches either into default reservations or into capacity blocks (EC2
        # takes one target capacity type per request): the cheapest group's kind wins.
        kind = ordered[0].capacity_reservation_type
        ordered = [g for g in ordered if g.capacity_reservation_type == kind]
        names = {o.instance_type for g in ordered for o in g.overrides}
        kept = [c for c in kept if c.name in names]
    return LaunchPlan(capacity_type=capacity_type, groups=tuple(ordered), candidates=tuple(kept))
