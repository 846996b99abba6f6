"""The unavailable-offerings cache: capacity AWS just refused, remembered for a few minutes.

When CreateFleet answers with an unfulfillable-capacity error (or a spot interruption arrives) for
an instance type in a zone, launching the same offering again right away would only fail again.
Karpenter keeps such offerings out of scheduling for 3 minutes, keyed
``capacityType:instanceType:zone``; this module is that cache. Time comes from an injected clock,
and every change bumps a sequence number (global and per instance type) so instance-type caches
know when to rebuild their offerings.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from karpy.runtime.clock import Clock
from karpy_aws.errors import SPOT_SERVICE_LINKED_ROLE_CODE, UNFULFILLABLE_CAPACITY_CODES

UNAVAILABLE_OFFERINGS_TTL: Final = datetime.timedelta(minutes=3)

log = logging.getLogger(__name__)


@attrs.frozen
class OfferingKey:
    """One offering: capacity type, instance type and zone."""

    capacity_type: str
    instance_type: str
    zone: str

    def __str__(self) -> str:
        return f"{self.capacity_type}:{self.instance_type}:{self.zone}"


@attrs.frozen(kw_only=True)
class FleetError:
    """One entry of CreateFleet's ``Errors``: which override failed and why."""

    code: str
    message: str
    instance_type: str | None
    zone: str | None
    subnet_id: str | None
    template_name: str | None = None

    @property
    def unfulfillable_capacity(self) -> bool:
        return self.code in UNFULFILLABLE_CAPACITY_CODES


def parse_fleet_errors(errors: Iterable[Mapping[str, Any]]) -> tuple[FleetError, ...]:
    """Turn CreateFleet's raw ``Errors`` list into values (pure)."""
    parsed = []
    for entry in errors:
        launched = entry.get("LaunchTemplateAndOverrides", {})
        overrides = launched.get("Overrides", {})
        template = launched.get("LaunchTemplateSpecification", {}).get("LaunchTemplateName")
        parsed.append(
            FleetError(
                code=str(entry.get("ErrorCode", "")),
                message=str(entry.get("ErrorMessage", "")),
                instance_type=overrides.get("InstanceType"),
                zone=overrides.get("AvailabilityZone"),
                subnet_id=overrides.get("SubnetId"),
                template_name=str(template) if template else None,
            )
        )
    return tuple(parsed)


class UnavailableOfferings:
    """TTL cache of offerings that recently failed. Not thread-safe; one event loop owns it."""

    def __init__(
        self, clock: Clock, *, ttl: datetime.timedelta = UNAVAILABLE_OFFERINGS_TTL
    ) -> None:
        self._clock = clock
        self._ttl = ttl
        self._offerings: dict[OfferingKey, datetime.datetime] = {}
        self._capacity_types: dict[str, datetime.datetime] = {}
        self._seq: dict[str, int] = {}
        self.seq_num = 0
        """Bumped on every change; a cache built at an older number is stale."""

    def mark_unavailable(
        self, *, reason: str, capacity_type: str, instance_type: str, zone: str
    ) -> None:
        """Keep ``capacity_type:instance_type:zone`` out of launches for the TTL."""
        key = OfferingKey(capacity_type, instance_type, zone)
        log.debug(
            "removing offering from offerings",
            extra={"reason": reason, "offering": str(key), "ttl": self._ttl.total_seconds()},
        )
        self._offerings[key] = self._clock.now() + self._ttl
        self._seq[instance_type] = self._seq.get(instance_type, 0) + 1
        self.seq_num += 1

    def mark_capacity_type_unavailable(self, capacity_type: str, *, reason: str) -> None:
        """Keep a whole capacity type out (e.g. spot without its service-linked role)."""
        log.debug(
            "removing capacity type from offerings",
            extra={"reason": reason, "capacity_type": capacity_type},
        )
        self._capacity_types[capacity_type] = self._clock.now() + self._ttl
        self.seq_num += 1

    def mark_fleet_errors(self, errors: Iterable[FleetError], *, capacity_type: str) -> int:
        """Record every capacity failure of one CreateFleet call; return how many were marked."""
        marked = 0
        for error in errors:
            if error.code == SPOT_SERVICE_LINKED_ROLE_CODE:
                self.mark_capacity_type_unavailable(capacity_type, reason=error.code)
                marked += 1
            elif error.unfulfillable_capacity and error.instance_type and error.zone:
                self.mark_unavailable(
                    reason=error.code,
                    capacity_type=capacity_type,
                    instance_type=error.instance_type,
                    zone=error.zone,
                )
                marked += 1
        return marked

    def is_unavailable(self, *, capacity_type: str, instance_type: str, zone: str) -> bool:
        """True while the offering (or its whole capacity type) is within its TTL."""
        now = self._clock.now()
        until = self._capacity_types.get(capacity_type)
        if until is not None and now < until:
            return True
        until = self._offerings.get(OfferingKey(capacity_type, instance_type, zone))
        return until is not None and now < until

    def instance_type_seq_num(self, instance_type: str) -> int:
        """Changes whenever an offering of ``instance_type`` is marked."""
        return self._seq.get(instance_type, 0)

    def unavailable(self) -> frozenset[OfferingKey]:
        """The offerings currently held out (expired entries excluded)."""
        now = self._clock.now()
        return frozenset(k for k, until in self._offerings.items() if now < until)

    def cleanup(self) -> int:
        """Drop expired entries (run periodically); return how many were dropped."""
        now = self._clock.now()
        expired = [k for k, until in self._offerings.items() if now >= until]
        for key in expired:
            del self._offerings[key]
        gone = [k for k, until in self._capacity_types.items() if now >= until]
        for ct in gone:
            del self._capacity_types[ct]
        if expired or gone:
            self.seq_num += 1
        return len(expired) + len(gone)
