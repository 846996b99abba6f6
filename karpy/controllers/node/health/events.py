"""The Events the node health controller records, one constructor each (as Karpenter's
node/health/events.go)."""

from __future__ import annotations

from typing import Final

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, normal, warning
from karpy.kube.kinds import NODECLAIMS, NODES

REASON_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
REASON_REPAIRED_ELSEWHERE: Final = "NodeRepairDeferred"


def repair_blocked(node: Node, threshold: str, scope: str) -> Event:
    """Too many nodes in `scope` are unhealthy for the controller to repair `node`."""
    return warning(
        NODES, node, REASON_REPAIR_BLOCKED, f"more than {threshold} nodes are unhealthy in {scope}"
    )


def repaired_elsewhere(node: Node, condition: str, owner: str) -> Event:
    """`node` is unhealthy, and `owner` (another controller) repairs it, so karpy does not."""
    return normal(
        NODES,
        node,
        REASON_REPAIRED_ELSEWHERE,
        f"node condition {condition} is unhealthy; repair is left to {owner}",
    )


def unhealthy_terminating(claim: NodeClaim, condition: str) -> Event:
    """The NodeClaim is deleted because its node's `condition` stayed unhealthy too long."""
    return normal(
        NODECLAIMS,
        claim,
        "DisruptionTerminating",
        f"Disrupting NodeClaim: Unhealthy (node condition {condition})",
    )
