"""The Events the NodeClaim controllers record, one constructor each (as Karpenter's
nodeclaim/lifecycle/events.go and nodeclaim/expiration)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from karpy.apis.duration import format_duration
from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, normal, warning
from karpy.kube.kinds import NODECLAIMS, NODES

REASON_DISRUPTION_TERMINATING: Final = "DisruptionTerminating"
REASON_RESOURCE_NOT_REGISTERED: Final = "ResourceNotRegistered"
REASON_FAILED_CONSISTENCY_CHECK: Final = "FailedConsistencyCheck"


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


def resource_not_registered(
    claim: NodeClaim, node: Node, missing: tuple[str, ...], timeout: timedelta
) -> tuple[Event, Event]:
    """The Node never reported extended resources its NodeClaim requested within the
    initialization timeout, so the NodeClaim is deleted and its pods provisioned again; said on
    the NodeClaim and on the Node, naming the resources."""
    names = ", ".join(repr(r) for r in missing)
    noun = "Resource" if len(missing) == 1 else "Resources"
    message = (
        f"{noun} {names} requested but not registered within "
        f"{format_duration(timeout.total_seconds())}, replacing the node"
    )
    return (
        warning(NODECLAIMS, claim, REASON_RESOURCE_NOT_REGISTERED, message),
        warning(NODES, node, REASON_RESOURCE_NOT_REGISTERED, message),
    )


def failed_consistency_check(claim: NodeClaim, issue: str) -> Event:
    """A consistency check found the NodeClaim and its Node disagreeing (`issue` says how)."""
    return warning(NODECLAIMS, claim, REASON_FAILED_CONSISTENCY_CHECK, issue)
