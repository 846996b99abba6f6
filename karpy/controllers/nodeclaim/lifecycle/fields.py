"""The log fields every lifecycle message carries, as Karpenter's do: which instance, where, and
on what terms (the NodeClaim's name is bound for the whole reconcile)."""

from __future__ import annotations

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
