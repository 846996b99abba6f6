"""The Events the NodeClaim controllers record, one constructor each (as Karpenter's
nodeclaim/lifecycle/events.go and nodeclaim/expiration)."""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, EventType, involved
from karpy.kube.kinds import NODECLAIMS

REASON_DISRUPTION_TERMINATING: Final = "DisruptionTerminating"


def launch_failed(claim: NodeClaim, reason: str, error: str) -> Event:
    """The provider could not launch the NodeClaim (`reason`: InsufficientCapacityError or
    NodeClassNotReady), so it is deleted and the pods go back to the provisioner."""
    return Event(
        involved=involved(NODECLAIMS, claim), type=EventType.WARNING, reason=reason, message=error
    )


def expired_terminating(claim: NodeClaim) -> Event:
    """The NodeClaim outlived its expireAfter and is deleted."""
    return Event(
        involved=involved(NODECLAIMS, claim),
        type=EventType.NORMAL,
        reason=REASON_DISRUPTION_TERMINATING,
        message=f"Disrupting NodeClaim: Expired (expireAfter {claim.spec.expire_after})",
    )
