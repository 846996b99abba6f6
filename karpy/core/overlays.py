"""NodeOverlays applied to an instance-type catalog: which overlay wins, which conflict, and the
prices and capacities every scheduling decision then reads.

Karpenter's rules (v1.7, `nodeoverlay` controller and instance-type store), as pure functions:

* Overlays are taken in order: higher weight first (unset weight is 0); equal weights by name,
  the name later in the alphabet first. `order` is that order.
* An overlay selects an instance type of a NodePool when the type's requirements, with the
  pool's name (`karpenter.sh/nodepool`) and its template labels, are compatible with the
  overlay's requirements (a key the type does not define passes only for NotIn/DoesNotExist).
  Of a selected type it selects the offerings whose zone and capacity type its requirements
  allow.
* For each offering, the first overlay in order that selects it and sets `price` or
  `priceAdjustment` sets its price; an adjustment applies to the provider's price, never to
  another overlay's, and a price below zero is zero.
* For each extended resource, the first overlay in order that selects the type and names the
  resource in `capacity` sets it (overlays naming different resources all apply).
* An overlay that would change the price of an offering, or a resource of a type, that an
  accepted overlay of the *same* weight already changes conflicts; it is not applied anywhere
  (all or nothing) and its status says so (`resolve`).

Pure: no I/O, clock or logging. Bad input raises OverlayError naming the field.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeVar

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.requirements import ANY, Requirement, RequirementError, Requirements
from karpy.core.resources import EMPTY, QuantityError, Resources

_K = TypeVar("_K")

STANDARD_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})

_PRICE_RE: Final = re.compile(r"^\d+(\.\d+)?$")
_ADJUSTMENT_RE: Final = re.compile(
    r"^(([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$"
)


class OverlayError(ValueError):
    """A NodeOverlay that cannot be applied; the message names the field."""


class PriceMode(enum.Enum):
    SET = "set"
    ADD = "add"
    PERCENT = "percent"


@attrs.frozen
class PriceChange:
    """`price` ("0.25": the price) or `priceAdjustment` ("+0.5", "-10%": a change to it)."""

    mode: PriceMode
    amount: float
    text: str

    @classmethod
    def parse(cls, text: str, *, field: str) -> PriceChange:
        """Read `price` (field ending in "price") or `priceAdjustment` as the CRD allows."""
        if field.endswith("priceAdjustment"):
            if _ADJUSTMENT_RE.fullmatch(text) is None:
                msg = (
                    f"{field}: {text!r} is not a signed amount ('+0.5', '-0.1') or percent "
                    "('+10%', '-15%', at least -100%)"
                )
                raise OverlayError(msg)
            if text.endswith("%"):
                return cls(PriceMode.PERCENT, float(text[:-1]), text)
            return cls(PriceMode.ADD, float(text), text)
        if _PRICE_RE.fullmatch(text) is None:
            msg = f"{field}: {text!r} is not a non-negative decimal price"
            raise OverlayError(msg)
        return cls(PriceMode.SET, float(text), text)

    def apply(self, price: float) -> float:
        """The provider's `price` changed; never below zero."""
        if self.mode is PriceMode.SET:
            return self.amount
        changed = (
            price * (1 + self.amount / 100)
            if self.mode is PriceMode.PERCENT
            else price + self.amount
        )
        return max(changed, 0.0)


@attrs.frozen
class Overlay:
    """One NodeOverlay, read: what it selects and what it changes."""

    name: str
    requirements: Requirements = ANY
    weight: int = 0
    price: PriceChange | None = None
    capacity: Resources = EMPTY

    @property
    def changes_anything(self) -> bool:
        return self.price is not None or bool(self.capacity)


def make_overlay(
    name: str,
    *,
    requirements: Iterable[tuple[str, str, Iterable[str]]] = (),
    weight: int | None = None,
    price: str | None = None,
    price_adjustment: str | None = None,
    capacity: Mapping[str, str] | None = None,
) -> Overlay:
    """An overlay from its spec's fields (requirements as (key, operator, values)). Raises
    OverlayError naming the field that cannot be read: what Karpenter's runtime validation
    refuses, and what its CRD would already refuse."""
    reqs: list[Requirement] = []
    for i, (key, operator, values) in enumerate(requirements):
        try:
            reqs.append(Requirement.new(key, operator, values))
        except RequirementError as error:
            raise OverlayError(f"spec.requirements[{i}]: {error}") from error
    if price is not None and price_adjustment is not None:
        raise OverlayError("spec: cannot set both 'price' and 'priceAdjustment'")
    change = (
        PriceChange.parse(price, field="spec.price")
        if price is not None
        else PriceChange.parse(price_adjustment, field="spec.priceAdjustment")
        if price_adjustment is not None
        else None
    )
    restricted = sorted(STANDARD_RESOURCES.intersection(capacity or {}))
    if restricted:
        msg = (
            f"spec.capacity: {', '.join(restricted)} may not be overlaid; only extended "
            "resources may be added"
        )
        raise OverlayError(msg)
    try:
        added = Resources.of(dict(capacity or {}))
    except QuantityError as error:
        raise OverlayError(f"spec.capacity: {error}") from error
    if weight is not None and not 1 <= weight <= 10000:
        raise OverlayError(f"spec.weight: {weight} is not between 1 and 10000")
    return Overlay(
        name=name,
        requirements=Requirements(reqs),
        weight=weight or 0,
        price=change,
        capacity=added,
    )


def order(overlays: Iterable[Overlay]) -> tuple[Overlay, ...]:
    """Karpenter's order: higher weight first; equal weights, the later name first."""
    by_name = sorted(overlays, key=lambda o: o.name, reverse=True)
    return tuple(sorted(by_name, key=lambda o: o.weight, reverse=True))


def pool_requirements(nodepool: str, template_labels: Mapping[str, str]) -> Requirements:
    """What an overlay may select a pool's types by besides their own requirements: the pool's
    name and its template labels."""
    return Requirements.from_labels({**template_labels, wk.LABEL_NODEPOOL: nodepool})


def selected_offerings(
    overlay: Overlay, instance_type: InstanceType, pool: Requirements
) -> tuple[Offering, ...]:
    """The offerings of `instance_type` (in `pool`) that `overlay` selects; empty when it does
    not select the type."""
    if not _selects(overlay.requirements, instance_type.requirements, pool):
        return ()
    return tuple(o for o in instance_type.offerings if o.matches(overlay.requirements))


def _selects(wanted: Requirements, labels: Requirements, pool: Requirements) -> bool:
    """Whether a type with `labels`, in a pool with `pool`, meets every requirement in
    `wanted`: what `Requirements.compatible` answers for the two merged, without building
    the merge or an explanation (this runs for every type, overlay and fetch)."""
    for req in wanted:
        mine, theirs = labels.get(req.key), pool.get(req.key)
        have = mine if theirs is None else theirs if mine is None else mine.intersection(theirs)
        if have is None:
            if not req.allows_absent():
                return False
        elif not have.intersects(req):
            return False
    return True


OfferingKey = tuple[str, str]
"""(zone, capacity type): an offering of one instance type."""


def _key(offering: Offering) -> OfferingKey:
    return (offering.zone, offering.capacity_type)


@attrs.frozen
class Applied:
    """Which overlay set what on one instance type: offering prices and resources."""

    prices: Mapping[OfferingKey, str] = attrs.field(factory=dict)
    capacity: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def overlays(self) -> tuple[str, ...]:
        """The overlays that changed the type, sorted."""
        return tuple(sorted({*self.prices.values(), *self.capacity.values()}))


def applied(
    instance_type: InstanceType, pool: Requirements, overlays: Sequence[Overlay]
) -> Applied:
    """What `overlays` (in `order`) set on `instance_type` in `pool`: first one wins each
    offering's price and each resource."""
    prices: dict[OfferingKey, str] = {}
    capacity: dict[str, str] = {}
    for overlay in overlays:
        if not overlay.changes_anything:
            continue
        offerings = selected_offerings(overlay, instance_type, pool)
        if not offerings:
            continue
        if overlay.price is not None:
            for offering in offerings:
                prices.setdefault(_key(offering), overlay.name)
        for resource in overlay.capacity:
            capacity.setdefault(resource, overlay.name)
    return Applied(prices, capacity)


def apply(
    instance_types: Iterable[InstanceType], pool: Requirements, overlays: Sequence[Overlay]
) -> tuple[InstanceType, ...]:
    """The provider's `instance_types` for `pool` as `overlays` (accepted, in `order`) change
    them; a type no overlay selects is returned as it was."""
    named = {o.name: o for o in overlays}
    out: list[InstanceType] = []
    for instance_type in instance_types:
        what = applied(instance_type, pool, overlays)
        if not what.prices and not what.capacity:
            out.append(instance_type)
            continue
        offerings = []
        for offering in instance_type.offerings:
            setter = what.prices.get(_key(offering))
            change = None if setter is None else named[setter].price
            offerings.append(
                offering
                if change is None
                else attrs.evolve(offering, price=change.apply(offering.price))
            )
        added = Resources.milli({r: named[name].capacity[r] for r, name in what.capacity.items()})
        capacity = Resources.milli(
            {**{r: instance_type.capacity[r] for r in instance_type.capacity}, **added}
        )
        out.append(
            attrs.evolve(
                instance_type,
                offerings=tuple(
                    sorted(offerings, key=lambda o: (o.price, o.zone, o.capacity_type))
                ),
                capacity=capacity,
            )
        )
    return tuple(out)


@attrs.frozen
class PoolCatalog:
    """One NodePool's view of the catalog: its selection requirements and its types."""

    requirements: Requirements
    instance_types: tuple[InstanceType, ...]


@attrs.frozen
class Resolution:
    """Which overlays apply (in order) and why the others do not."""

    accepted: tuple[Overlay, ...]
    conflicts: Mapping[str, str] = attrs.field(factory=dict)
    """Overlay name -> the accepted overlay of the same weight it conflicts with."""


def resolve(overlays: Iterable[Overlay], catalogs: Iterable[PoolCatalog]) -> Resolution:
    """Take `overlays` in `order`; accept each that does not change, at its own weight, an
    offering's price or a type's resource an accepted overlay of that weight already changes
    (in any pool). Deterministic in the set of overlays, whatever their input order."""
    pools = tuple(catalogs)
    # (pool index, type name, offering) -> (weight, overlay) of the accepted price setters;
    # (pool index, type name, resource) -> likewise for capacity.
    prices: dict[tuple[int, str, OfferingKey], list[tuple[int, str]]] = {}
    resources: dict[tuple[int, str, str], list[tuple[int, str]]] = {}
    accepted: list[Overlay] = []
    conflicts: dict[str, str] = {}
    for overlay in order(overlays):
        price_keys: list[tuple[int, str, OfferingKey]] = []
        resource_keys: list[tuple[int, str, str]] = []
        for index, pool in enumerate(pools):
            for instance_type in pool.instance_types:
                offerings = selected_offerings(overlay, instance_type, pool.requirements)
                if not offerings:
                    continue
                if overlay.price is not None:
                    price_keys.extend((index, instance_type.name, _key(o)) for o in offerings)
                resource_keys.extend((index, instance_type.name, r) for r in overlay.capacity)
        rival = _same_weight(overlay, price_keys, prices) or _same_weight(
            overlay, resource_keys, resources
        )
        if rival is not None:
            conflicts[overlay.name] = rival
            continue
        accepted.append(overlay)
        for price_key in price_keys:
            prices.setdefault(price_key, []).append((overlay.weight, overlay.name))
        for resource_key in resource_keys:
            resources.setdefault(resource_key, []).append((overlay.weight, overlay.name))
    return Resolution(tuple(accepted), conflicts)


def _same_weight(
    overlay: Overlay, keys: Iterable[_K], taken: Mapping[_K, list[tuple[int, str]]]
) -> str | None:
    for key in keys:
        for weight, name in taken.get(key, ()):
            if weight == overlay.weight:
                return name
    return None
