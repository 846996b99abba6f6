"""Capacity reservations an EC2NodeClass selects, and how many instances each still takes.

``capacityReservationSelectorTerms`` name on-demand capacity reservations (and capacity blocks)
by id, or by tags with an optional owner account; the status controller resolves them with
DescribeCapacityReservations into ``status.capacityReservations``, as Karpenter does. A
reservation's instance type then gets a ``reserved`` offering in the reservation's zone, priced
as Karpenter prices it (the on-demand price divided by ten million: nearly free, so it is
preferred, yet dearer types stay dearer), while the reservation has room. Room is EC2's
AvailableInstanceCount, read at most once a minute, less the instances karpy launched into it
since, and zero once a launch is refused with ReservationCapacityExceeded, until EC2 next says
otherwise. Reservations not active (cancelled, expired, failed) are not selected.

A reservation that ends (expires or is cancelled) leaves its instances running, billed as
on-demand: karpy then relabels their NodeClaims and Nodes ``on-demand``
(karpy_aws.controllers.capacitytype) rather than drifting them, so ``ended()`` tells the two
apart: a reservation EC2 no longer reports active has ended; one still active that the
NodeClass no longer selects has not.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import Clock
from karpy_aws.apis import ec2nodeclass_status as nodeclass_status
from karpy_aws.apis.ec2nodeclass import CapacityReservationSelectorTerm
from karpy_aws.providers.instancetype.offerings import AWSInstanceType, Offering
from karpy_aws.session import AWSClient

RESERVED_PRICE_DIVISOR: Final = 10_000_000.0
"""Karpenter's reserved offering price is the on-demand price over this."""
AVAILABILITY_TTL: Final = datetime.timedelta(minutes=1)
USABLE_STATES: Final = ("active",)


@attrs.frozen(kw_only=True)
class Reservation:
    """One capacity reservation as EC2 describes it."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    instance_match_criteria: str
    reservation_type: str
    state: str
    available: int
    total: int
    end_time: datetime.datetime | None = None


def parse_reservation(raw: Mapping[str, Any]) -> Reservation:
    """One DescribeCapacityReservations entry (pure)."""
    end = raw.get("EndDate")
    if isinstance(end, str):
        end = datetime.datetime.fromisoformat(end)
    return Reservation(
        id=str(raw["CapacityReservationId"]),
        instance_type=str(raw.get("InstanceType", "")),
        zone=str(raw.get("AvailabilityZone", "")),
        owner_id=str(raw.get("OwnerId", "")),
        instance_match_criteria=str(raw.get("InstanceMatchCriteria", "open")),
        reservation_type=str(raw.get("ReservationType") or "default"),
        state=str(raw.get("State", "")),
        available=int(raw.get("AvailableInstanceCount", 0)),
        total=int(raw.get("TotalInstanceCount", 0)),
        end_time=end if isinstance(end, datetime.datetime) else None,
    )


def term_request(term: CapacityReservationSelectorTerm) -> dict[str, Any]:
    """DescribeCapacityReservations' parameters for one selector term (pure): the id, or the
    tags ('*' any value), owner and match criteria as filters; active reservations only."""
    filters: list[dict[str, Any]] = [{"Name": "state", "Values": list(USABLE_STATES)}]
    if term.id is not None:
        return {"CapacityReservationIds": [term.id], "Filters": filters}
    for key, value in sorted(term.tags.items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    if term.owner_id is not None:
        filters.append({"Name": "owner-id", "Values": [term.owner_id]})
    if term.instance_match_criteria is not None:
        filters.append(
            {"Name": "instance-match-criteria", "Values": [str(term.instance_match_criteria)]}
        )
    return {"Filters": filters}


async def describe_reservations(
    ec2: AWSClient, terms: Sequence[CapacityReservationSelectorTerm]
) -> tuple[Reservation, ...]:
    """The reservations any term selects (OR across terms), by id. An unknown id raises
    karpy_aws.errors.NotFoundError naming it."""
    found: dict[str, Reservation] = {}
    for term in terms:
        rows = await ec2.paginate(
            "DescribeCapacityReservations",
            result_key="CapacityReservations",
            **term_request(term),
        )
        for row in rows:
            reservation = parse_reservation(row)
            if reservation.state in USABLE_STATES:
                found[reservation.id] = reservation
    return tuple(sorted(found.values(), key=lambda r: r.id))


class ReservationAvailability:
    """How many more instances each reservation takes, as far as karpy knows. Not
    thread-safe; one event loop owns it."""

    def __init__(self, ec2: AWSClient, clock: Clock, *, ttl: datetime.timedelta = AVAILABILITY_TTL):
        self._ec2 = ec2
        self._clock = clock
        self._ttl = ttl
        self._available: dict[str, int] = {}
        self._read_at: dict[str, datetime.datetime] = {}
        self._ended: set[str] = set()
        self.seq_num = 0
        """Bumped whenever a count changes; offerings built at an older number are stale."""

    async def refresh(self, ids: Iterable[str], *, force: bool = False) -> None:
        """Re-read the reservations among ``ids`` not read within the TTL (all of them with
        ``force``), in one call. A reservation EC2 no longer reports active has no room and has
        ended."""
        now = self._clock.now()
        stale = sorted(
            i
            for i in set(ids)
            if force or i not in self._read_at or now - self._read_at[i] >= self._ttl
        )
        if not stale:
            return
        rows = await self._ec2.paginate(
            "DescribeCapacityReservations",
            result_key="CapacityReservations",
            Filters=[{"Name": "state", "Values": list(USABLE_STATES)}],
        )
        seen = {r.id: r for r in map(parse_reservation, rows)}
        for reservation_id in stale:
            found = seen.get(reservation_id)
            self._set(reservation_id, found.available if found is not None else 0)
            self._read_at[reservation_id] = now
            if found is None:
                self._ended.add(reservation_id)
            else:
                self._ended.discard(reservation_id)

    def ended(self, reservation_id: str) -> bool:
        """Whether EC2, when last asked, no longer reported the reservation active (it expired
        or was cancelled; its instances now run as on-demand)."""
        return reservation_id in self._ended

    def available(self, reservation_id: str) -> int:
        """The instances the reservation still takes (0 when unknown)."""
        return self._available.get(reservation_id, 0)

    def launched(self, reservation_id: str) -> None:
        """One instance went into the reservation."""
        self._set(reservation_id, max(self.available(reservation_id) - 1, 0))

    def exhausted(self, reservation_id: str) -> None:
        """EC2 refused a launch into the reservation for want of room."""
        self._set(reservation_id, 0)

    def _set(self, reservation_id: str, count: int) -> None:
        if self._available.get(reservation_id) != count:
            self._available[reservation_id] = count
            self.seq_num += 1


def with_reserved_offerings(
    instance_types: Iterable[AWSInstanceType],
    reservations: Sequence[nodeclass_status.CapacityReservation],
    *,
    available: Callable[[str], int],
    zone_ids: Mapping[str, str],
) -> tuple[AWSInstanceType, ...]:
    """``instance_types`` with a ``reserved`` offering for each reservation of their type:
    in its zone, at the type's on-demand price over RESERVED_PRICE_DIVISOR, available while
    ``available(id)`` is above zero (pure)."""
    by_type: dict[str, list[nodeclass_status.CapacityReservation]] = {}
    for reservation in reservations:
        by_type.setdefault(reservation.instance_type, []).append(reservation)
    out = []
    for it in instance_types:
        mine = by_type.get(it.name)
        if not mine:
            out.append(it)
            continue
        on_demand = min(
            (o.price for o in it.offerings if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND),
            default=0.0,
        )
        reserved = tuple(
            Offering(
                zone=r.availability_zone,
                zone_id=zone_ids.get(r.availability_zone, ""),
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=on_demand / RESERVED_PRICE_DIVISOR,
                available=available(r.id) > 0,
                reservation_id=r.id,
                reservation_type=str(r.reservation_type),
            )
            for r in mine
        )
        offers = tuple(
            sorted((*it.offerings, *reserved), key=lambda o: (o.price, o.zone, o.capacity_type))
        )
        out.append(attrs.evolve(it, offerings=offers))
    return tuple(out)
