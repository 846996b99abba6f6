"""When the provisioner first found room for each pending pod (Karpenter's pod scheduling
success time).

Karpenter's ``karpenter_pods_provisioning_*`` metrics measure from that moment, not from the
pod's creation: how long a pod waited after karpy knew where it would go, to be bound and to run.
The provisioner writes the moment here after each pass (a pod placed on a new NodeClaim, or on an
existing or in-flight node); the pod metrics controller records the histograms when the pod binds
and runs, and forgets the pod once it runs or goes. It lives in cluster state, below both
controllers, as the nominations do. Kept in memory, as Karpenter keeps it: after a restart a pod
counts from the first pass of the new process.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from karpy.state.nominations import PodKey


class SchedulableTimes:
    """The first time a provisioning pass placed each pod, until the pod runs or goes."""

    def __init__(self) -> None:
        self._since: dict[PodKey, datetime.datetime] = {}

    def placed(self, pods: Iterable[PodKey], *, at: datetime.datetime) -> None:
        """A pass placed `pods` at `at`; a pod placed before keeps its first time."""
        for key in pods:
            self._since.setdefault(key, at)

    def since(self, key: PodKey) -> datetime.datetime | None:
        """When `key` was first placed, or None if no pass has placed it."""
        return self._since.get(key)

    def forget(self, key: PodKey) -> None:
        """`key` runs, or is gone: nothing more is measured from its placement."""
        self._since.pop(key, None)

    def __len__(self) -> int:
        return len(self._since)
