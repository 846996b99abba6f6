"""The provider's upkeep on the leader: caches refreshed and launch templates collected.

Declared as a periodic controller (`karpy.manager.Singleton`) that the operator
runs with its others. :class:`MaintenanceController` adopts the cluster's launch templates once
(``start_leading``), then calls ``maintain`` every period: instance types and prices when due,
expired capacity errors forgotten, launch templates unused for a minute deleted. It lives beside
the CloudProvider because it maintains that provider's own state, not the cluster's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar, Final, Protocol

from karpy.manager import Singleton
from karpy.runtime.reconciler import Result

MAINTENANCE_PERIOD: Final = 30.0
"""Seconds between upkeep passes: well inside the launch-template TTL (1 min) and the
unavailable-offerings TTL (3 min); refreshes that are not due cost nothing."""
MAINTENANCE_TIMEOUT: Final = 600.0
"""Deadline in seconds for one upkeep pass (a full catalog refresh is many AWS calls)."""

log = logging.getLogger(__name__)


class Maintainable(Protocol):
    """What the upkeep loop drives (AWSCloudProvider)."""

    async def start_leading(self) -> int:
        """Adopt the cluster's launch templates; return how many were found."""
        ...

    async def maintain(self) -> tuple[str, ...]:
        """Periodic upkeep; return the launch templates deleted."""
        ...


def _positive(owner: str, period: float) -> float:
    if period <= 0:
        msg = f"{owner}: period must be > 0 seconds, got {period}"
        raise ValueError(msg)
    return period


class MaintenanceController:
    """``start_leading()`` once, then ``maintain()`` every period."""

    name: ClassVar[str] = "providers.maintenance"

    def __init__(self, target: Maintainable, *, period: float = MAINTENANCE_PERIOD) -> None:
        self._period = _positive(type(self).__name__, period)
        self._target = target
        self._leading = False

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass. Raises whatever the target raises (the runner backs off)."""
        async with asyncio.timeout(MAINTENANCE_TIMEOUT):
            if not self._leading:
                adopted = await self._target.start_leading()
                self._leading = True
                log.debug("hydrated launch template cache", extra={"launch_templates": adopted})
            deleted = await self._target.maintain()
        for name in deleted:
            log.info("deleted launch template", extra={"launch_template": name})
        return Result(requeue_after=self._period)
