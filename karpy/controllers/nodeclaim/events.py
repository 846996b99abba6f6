"""The Events the NodeClaim controllers record, one constructor each (as Karpenter's
nodeclaim/lifecycle/events.go and nodeclaim/expiration)."""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, normal, warning
from karpy.kube.kinds import NODECLAIMS

REASON_DISRUPTION_TERMINATING: Final = "DisruptionTerminating"


def launch_failed(claim: NodeClaim, reason: str, error: str) -> Event:
    """The provider could not launch the NodeClaim (`reason`: InsufficientCapacityError or
    NodeClassNotReady), so it is deleted and the pods go back to the provisioner."""
    return warning(NODECLAIMS, claim, reason, error)


def expired_terminating(claim: NodeClaim) -> Event:
    """The NodeClaim outlived its expireAfter and is deleted."""
    return normal(
        NODECLAIMS,
        claim,
        REASON_DISRUPTION_TERMINATING,
        f"Disrupting NodeClaim: Expired (expireAfter {claim.spec.expire_after})",
    )
