"""InstanceType and Offering: what a cloud provider can launch, and at what price.

Pure values, shaped like Karpenter's ``cloudprovider.InstanceType``: requirements (its labels as
sets), capacity, overhead (kube-reserved, system-reserved, eviction threshold) and offerings
(zone and capacity type, price, availability). The scheduler reads only these, so any provider, the
fake generator or a scenario file can feed it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import EMPTY, Resources


@attrs.frozen
class Offering:
    """One way to buy an instance type: a zone and a capacity type at a price per hour."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True

    def matches(self, requirements: Requirements) -> bool:
        """Does this offering satisfy the zone and capacity-type requirements?"""
        zone = requirements.get(wk.LABEL_TOPOLOGY_ZONE)
        if zone is not None and not zone.has(self.zone):
            return False
        ct = requirements.get(wk.LABEL_CAPACITY_TYPE)
        return ct is None or ct.has(self.capacity_type)


@attrs.frozen
class InstanceType:
    """A launchable machine shape.

    ``requirements`` always pins ``node.kubernetes.io/instance-type`` to ``name`` and lists the
    zones and capacity types of its *available* offerings (see ``make``).
    """

    name: str
    requirements: Requirements
    capacity: Resources
    offerings: tuple[Offering, ...]
    overhead: Resources = EMPTY

    @classmethod
    def make(
        cls,
        name: str,
        capacity: Resources,
        offerings: Iterable[Offering],
        *,
        overhead: Resources = EMPTY,
        labels: dict[str, str] | None = None,
        extra: Iterable[Requirement] = (),
    ) -> InstanceType:
        """Build an instance type whose requirements follow from its name, labels and offerings."""
        offers = tuple(sorted(offerings, key=lambda o: (o.price, o.zone, o.capacity_type)))
        avail = [o for o in offers if o.available]
        reqs = [
            Requirement(wk.LABEL_INSTANCE_TYPE, False, frozenset({name})),
            Requirement(wk.LABEL_TOPOLOGY_ZONE, False, frozenset(o.zone for o in avail)),
            Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset(o.capacity_type for o in avail)),
        ]
        reqs.extend(Requirement(k, False, frozenset({v})) for k, v in (labels or {}).items())
        reqs.extend(extra)
        return cls(name, Requirements(reqs), capacity, offers, overhead)

    @property
    def allocatable(self) -> Resources:
        """Capacity less overhead: what pods may request."""
        return self.capacity - self.overhead

    def cheapest(self, requirements: Requirements) -> Offering | None:
        """The cheapest available offering compatible with ``requirements``."""
        for offering in self.offerings:
            if offering.available and offering.matches(requirements):
                return offering
        return None
