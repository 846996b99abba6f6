"""Which subnet a launch uses in each zone: the roomiest, counting launches still in flight.

A launch goes, in each zone, to the NodeClass's subnet with the most free addresses. Asking EC2
before every launch costs a call per NodeClaim, and EC2's count lags: a burst of launches would
all pick the same subnet and drain it. Like Karpenter, subnets are cached for a minute per
selector, and every launch reserves the addresses its node will use (one per pod it can hold,
as the VPC CNI assigns them) on the subnet it landed in, until the next refresh brings EC2's
own count. A subnet EC2 reports out of addresses is left out until then.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Final

import attrs

from karpy.runtime.clock import Clock
from karpy_aws.providers.network import Subnet, discover_subnets, subnet_per_zone
from karpy_aws.providers.selectors import SelectorTerm
from karpy_aws.session import AWSClient

SUBNET_CACHE_TTL: Final = datetime.timedelta(minutes=1)


class ZonalSubnets:
    """Cached subnet discovery with in-flight address reservations. One event loop owns it."""

    def __init__(
        self, ec2: AWSClient, clock: Clock, *, ttl: datetime.timedelta = SUBNET_CACHE_TTL
    ) -> None:
        self._ec2 = ec2
        self._clock = clock
        self._ttl = ttl
        self._cache: dict[tuple[SelectorTerm, ...], tuple[tuple[Subnet, ...], datetime.datetime]]
        self._cache = {}
        self._in_flight: dict[str, int] = {}
        self._exhausted: set[str] = set()

    async def for_launch(self, terms: Sequence[SelectorTerm]) -> dict[str, Subnet]:
        """Zone -> the subnet to launch into, by free addresses less reservations.

        Raises as network.discover_subnets does when the cache has to be refreshed.
        """
        key = tuple(terms)
        now = self._clock.now()
        cached = self._cache.get(key)
        if cached is None or now >= cached[1]:
            found = await discover_subnets(self._ec2, key)
            for subnet in found:  # EC2's count now includes what was in flight
                self._in_flight.pop(subnet.id, None)
                self._exhausted.discard(subnet.id)
            cached = (found, now + self._ttl)
            self._cache[key] = cached
        return subnet_per_zone(
            [
                attrs.evolve(
                    s, available_ip_count=s.available_ip_count - self._in_flight.get(s.id, 0)
                )
                for s in cached[0]
                if s.id not in self._exhausted
            ]
        )

    def exhausted(self, subnet_id: str) -> None:
        """EC2 said the subnet has no free address (InsufficientFreeAddressesInSubnet): leave
        it out until the next refresh."""
        self._exhausted.add(subnet_id)

    def reserve(self, subnet_id: str, addresses: int) -> None:
        """A node launched into ``subnet_id`` will use ``addresses`` addresses."""
        self._in_flight[subnet_id] = self._in_flight.get(subnet_id, 0) + addresses
