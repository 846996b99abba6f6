"""A scenario's `nodeOverlays`: read, judged and applied to its catalog as the cluster would.

Each entry is a NodeOverlay's name and spec, flattened as the scenario's NodePools are:

    nodeOverlays:
      - name: savings-plan
        weight: 10                       # optional, 1-10000
        requirements:                    # optional: all types when empty
          - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        priceAdjustment: "-30%"          # or price: "0.05" (not both)
        capacity: {example.com/widget: "4"}

They are resolved with the nodeoverlay controller's rules (karpy.core.overlays.resolve, over
every NodePool's catalog): an overlay that conflicts with an accepted one of the same weight is
not applied, and `karpy simulate` says so, as the overlay's ValidationSucceeded=False (reason
Conflict) would in a cluster. The accepted ones change each NodePool's instance types before
anything is planned or consolidated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from karpy.core.instancetypes import InstanceType
from karpy.core.overlays import (
    Applied,
    Overlay,
    OverlayError,
    PoolCatalog,
    applied,
    apply,
    make_overlay,
    pool_requirements,
    resolve,
)
from karpy.core.requirements import Requirements
from karpy.core.snapshot import NodePool
from karpy.simulate.podspec import items_of, parse_requirements
from karpy.simulate.reader import Node

_KEYS = {"name", "weight", "requirements", "price", "priceAdjustment", "capacity"}


@attrs.frozen
class OverlayPlan:
    """The scenario's overlays as judged: which apply, which conflict, and each pool's view."""

    accepted: tuple[Overlay, ...] = ()
    conflicts: Mapping[str, str] = attrs.field(factory=dict)
    """Overlay name -> the accepted overlay of the same weight it conflicts with."""
    pools: Mapping[str, Requirements] = attrs.field(factory=dict)
    """NodePool name -> what overlays select its types by besides their labels."""
    catalog: tuple[InstanceType, ...] = ()
    """The scenario's catalog before overlays."""

    @property
    def empty(self) -> bool:
        """No overlay at all in the scenario."""
        return not self.accepted and not self.conflicts

    def types_for(self, pool: str) -> tuple[InstanceType, ...]:
        """`pool`'s instance types with the accepted overlays applied."""
        if not self.accepted:
            return self.catalog
        return apply(self.catalog, self.pools[pool], self.accepted)

    def applied_to(self, pool: str, instance_type: str) -> Applied:
        """What the accepted overlays set on `instance_type` in `pool` (nothing if unknown)."""
        found = next((t for t in self.catalog if t.name == instance_type), None)
        if found is None or pool not in self.pools:
            return Applied()
        return applied(found, self.pools[pool], self.accepted)


def _overlay(node: Node) -> Overlay:
    node.check_keys(_KEYS)
    weight, price = node.get("weight"), node.get("price")
    adjustment, capacity = node.get("priceAdjustment"), node.get("capacity")
    try:
        overlay = make_overlay(
            node.req("name").text(),
            weight=None if weight is None else weight.integer(),
            price=None if price is None else price.text(),
            price_adjustment=None if adjustment is None else adjustment.text(),
            capacity=None if capacity is None else capacity.string_map(),
        )
    except OverlayError as error:
        # The core names the spec field; the scenario's path leads to the entry.
        raise node.fail(str(error).removeprefix("spec").lstrip(".: ")) from error
    return attrs.evolve(overlay, requirements=parse_requirements(node.get("requirements")))


def parse_overlays(
    node: Node | None, pools: Iterable[NodePool], catalog: tuple[InstanceType, ...]
) -> OverlayPlan:
    """The scenario's `nodeOverlays` (absent: none), judged against `catalog` in `pools`."""
    overlays = [_overlay(n) for n in items_of(node)]
    names = [o.name for o in overlays]
    if node is not None and len(set(names)) != len(names):
        raise node.fail("nodeOverlay names must be unique")
    selection: dict[str, Requirements] = {
        p.name: pool_requirements(p.name, dict(p.labels)) for p in pools
    }
    resolution = resolve(overlays, [PoolCatalog(r, catalog) for r in selection.values()])
    return OverlayPlan(
        accepted=resolution.accepted,
        conflicts=resolution.conflicts,
        pools=selection,
        catalog=catalog,
    )


def describe(plan: OverlayPlan) -> list[str]:
    """One line per overlay: applied (with what it changes) or why not."""
    lines = [
        f"overlay {o.name} (weight {o.weight}): applied"
        + (f", price {o.price.text}" if o.price is not None else "")
        + (f", capacity {', '.join(sorted(o.capacity.render()))}" if o.capacity else "")
        for o in plan.accepted
    ]
    lines += [
        f"overlay {name}: not applied, conflict with {rival} (same weight)"
        for name, rival in sorted(plan.conflicts.items())
    ]
    return lines


def applied_text(plan: OverlayPlan, pool: str, instance_type: str) -> str:
    """Which overlays changed `instance_type` in `pool`, for `karpy explain`; empty if none."""
    what = plan.applied_to(pool, instance_type)
    if not what.overlays:
        return ""
    parts = [
        f"price of {zone}/{capacity_type} from {name}"
        for (zone, capacity_type), name in sorted(what.prices.items())
    ]
    parts += [f"{resource} from {name}" for resource, name in sorted(what.capacity.items())]
    return f"overlays on {instance_type}: {'; '.join(parts)}\n"
