"""CreateFleet's Context kept on the fleet, as EC2 keeps it (moto drops the parameter).

An EC2NodeClass's ``context`` goes out with every CreateFleet karpy sends. moto accepts the
parameter and forgets it, so nothing on its side would show whether karpy sent it. ``install()``
wraps moto's CreateFleet handler so the fleet it made carries the Context, and DescribeFleets
reports it as EC2 does (once per process; moto's state is per process too).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_installed = threading.Event()


def install() -> None:
    """Make moto's fleets keep CreateFleet's Context. Imports moto; call after idempotency's."""
    if _installed.is_set():
        return
    from moto.ec2.responses.fleets import Fleets

    original: Callable[[Any], Any] = Fleets.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any) -> Any:
        context = self._get_param("Context")
        result = original(self)
        fleet_id = getattr(result, "result", {}).get("FleetId")
        fleet = self.ec2_backend.fleets.get(fleet_id) if fleet_id else None
        if context and fleet is not None:
            fleet.context = str(context)
        return result

    Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
    _installed.set()
