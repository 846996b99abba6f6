"""The labels Karpenter puts on a NodeClaim's counters, read off the NodeClaim.

karpenter_nodeclaims_created_total and karpenter_nodeclaims_disrupted_total are recorded by the
provisioner, the disruption queue, expiry, garbage collection, node repair and a provider's
interruption handling; each must carry the same label names as Karpenter's or a dashboard that
sums by them splits. They live here, below every controller, so no controller imports another.
"""

from __future__ import annotations

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim

PROVISIONED_REASON = "provisioned"
"""The `reason` of karpenter_nodeclaims_created_total for a NodeClaim the provisioner made."""


def created_labels(claim: NodeClaim, reason: str) -> dict[str, str]:
    """reason, nodepool and min_values_relaxed ("true" when the scheduler relaxed a minValues
    requirement for `claim`, from its annotation; "false" without one, as Karpenter assumes)."""
    return {
        "reason": reason,
        "nodepool": claim.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
        "min_values_relaxed": claim.metadata.annotations.get(
            wk.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED, "false"
        ),
    }


def disrupted_labels(claim: NodeClaim, reason: str) -> dict[str, str]:
    """reason, nodepool and capacity_type (the NodeClaim's label; empty before launch)."""
    labels = claim.metadata.labels
    return {
        "reason": reason,
        "nodepool": labels.get(wk.LABEL_NODEPOOL, ""),
        "capacity_type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
    }
