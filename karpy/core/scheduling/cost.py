"""A NodePool's cost limit (spec.limits["karpy.sh/cost-per-hour"]), charged like a resource.

Karpenter caps a NodePool by the capacity of its nodes (cpu, memory, ...); users also want to cap
what it spends (kubernetes-sigs/karpenter#1215). karpy reads a cost cap in $/h as one more
limited resource, so provisioning honours it exactly as it honours resource limits: a NodeClaim
is charged what it could cost at most, the price of the dearest available offering among the
instance types it may still launch (as resource limits are charged the largest capacity among
them), and a launch whose charge would cross what is left of the cap is not made. Existing nodes
(and in-flight NodeClaims) are charged the price of their own offering (instance type, zone and
capacity type from their labels), or of their type's dearest offering when that one is not
listed; a node of a type the pool does not offer is charged nothing, for want of a price.

Amounts are milli-units, like every resource: a price is rounded up to a tenth of a cent an hour,
so a cap is never crossed by rounding. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.requirements import Requirements
from karpy.core.snapshot import Node

COST: Final = wk.LIMIT_COST_PER_HOUR


def price_milli(price: float) -> int:
    """`price` ($/h) in milli-units, rounded up."""
    return max(0, math.ceil(round(price * 1000, 6)))


def dearest_milli(instance_type: InstanceType, requirements: Requirements) -> int:
    """The most one NodeClaim of `instance_type` could cost under `requirements`: its dearest
    available compatible offering (0 when it has none)."""
    prices = [o.price for o in instance_type.offerings if o.available and o.matches(requirements)]
    return price_milli(max(prices)) if prices else 0


def node_milli(node: Node, types: Sequence[InstanceType]) -> int:
    """What an existing node (or in-flight NodeClaim) costs (see the module docstring)."""
    labels = node.labels_dict
    name = labels.get(wk.LABEL_INSTANCE_TYPE)
    found = next((t for t in types if t.name == name), None)
    if found is None:
        return 0
    zone = labels.get(wk.LABEL_TOPOLOGY_ZONE)
    capacity_type = labels.get(wk.LABEL_CAPACITY_TYPE)
    for offering in found.offerings:
        if offering.zone == zone and offering.capacity_type == capacity_type:
            return price_milli(offering.price)
    return price_milli(max((o.price for o in found.offerings), default=0.0))
