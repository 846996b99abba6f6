"""Failed status checks, which moto never reports: an instance reported impaired stays impaired.

karpy replaces an instance whose status checks fail (DescribeInstanceStatus, polled once a
minute), but moto reports every running instance ``ok``, so a process run against the emulator
(the end-to-end tier, ``karpy demo --provider aws``) could never meet a failing one. EC2's
``ReportInstanceStatus`` is how a user tells AWS that an instance is unwell; moto does not have
it (its EC2 answers "not implemented"). ``install()`` adds it, and in this world the report is
taken at its word: an instance reported ``impaired`` fails its instance reachability check in
every DescribeInstanceStatus from then on, as a host whose kernel hung would, until it is
reported ``ok`` again or stops running. The caller's other parameters (reason codes, times,
description) are accepted and not kept, and an unknown instance id is refused with EC2's
``InvalidInstanceID.NotFound``, as EC2 refuses it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

IMPAIRED: Final = "impaired"
RUNNING_CODE: Final = 16

_installed = threading.Event()
_lock = threading.Lock()
_impaired: set[str] = set()
"""Instance ids reported impaired (ids are unique across moto's accounts and regions)."""


def install() -> None:
    """Add ReportInstanceStatus to moto's EC2 and make a reported instance fail its instance
    status check. Imports moto."""
    if _installed.is_set():
        return
    from moto.core.responses import ActionResult
    from moto.ec2.models.instances import Instance
    from moto.ec2.responses import EC2Response

    def report_instance_status(self: Any) -> Any:
        ids = [str(i) for i in self._get_param("Instances", [])]
        status = str(self._get_param("Status"))
        for instance_id in ids:
            self.ec2_backend.get_instance(instance_id)  # InvalidInstanceID.NotFound if unknown
        with _lock:
            if status == IMPAIRED:
                _impaired.update(ids)
            else:
                _impaired.difference_update(ids)
        return ActionResult({})

    healthy: Callable[[Any], dict[str, Any]] = Instance.instance_status.fget  # type: ignore[attr-defined]

    def instance_status(self: Any) -> dict[str, Any]:
        with _lock:
            reported = self.id in _impaired
        if not reported or self.state_code != RUNNING_CODE:
            return healthy(self)
        return {"Status": IMPAIRED, "Details": [{"Name": "reachability", "Status": "failed"}]}

    EC2Response.report_instance_status = report_instance_status  # type: ignore[attr-defined]
    Instance.instance_status = property(instance_status)  # type: ignore[method-assign,assignment]
    _installed.set()
