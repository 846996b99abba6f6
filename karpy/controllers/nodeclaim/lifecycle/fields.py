"""The log fields every lifecycle message carries, as Karpenter's do: which instance, where, and
on what terms (the NodeClaim's name is bound for the whole reconcile); and `Said`, which keeps a
transition from being logged twice.

A step sets a condition on its working copy and logs the transition; the controller then writes
the status. When that write loses a race (409) the reconcile runs again and the step would log
the same transition again, so one launch read as two. `Said` remembers what was said about each
NodeClaim (by UID) until the NodeClaim is gone.
"""

from __future__ import annotations

from collections import OrderedDict

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim


def log_fields(nodeclaim: NodeClaim) -> dict[str, object]:
    labels = nodeclaim.metadata.labels
    return {
        "provider-id": nodeclaim.status.provider_id or "",
        "instance-type": labels.get(wk.LABEL_INSTANCE_TYPE, ""),
        "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
        "capacity-type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
    }


class Said:
    """(message, NodeClaim UID) pairs already logged, the oldest forgotten past `limit`."""

    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit
        self._said: OrderedDict[tuple[str, str], None] = OrderedDict()

    def first(self, message: str, nodeclaim: NodeClaim) -> bool:
        """True the first time `message` is said about `nodeclaim` (and remember it)."""
        key = (message, nodeclaim.metadata.uid or nodeclaim.metadata.name or "")
        if key in self._said:
            return False
        self._said[key] = None
        while len(self._said) > self._limit:
            self._said.popitem(last=False)
        return True

    def forget_one(self, message: str, nodeclaim: NodeClaim) -> None:
        """Unsay `message` about `nodeclaim` (what it reported did not go through)."""
        self._said.pop((message, nodeclaim.metadata.uid or nodeclaim.metadata.name or ""), None)

    def forget(self, nodeclaim: NodeClaim) -> None:
        """Drop everything said about `nodeclaim` (it is gone)."""
        uid = nodeclaim.metadata.uid or nodeclaim.metadata.name or ""
        for key in [k for k in self._said if k[1] == uid]:
            del self._said[key]
