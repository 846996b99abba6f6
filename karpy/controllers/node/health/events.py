"""The Events the node health controller records, one constructor each (as Karpenter's
node/health/events.go)."""

from __future__ import annotations

from typing import Final

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, EventType, involved
from karpy.kube.kinds import NODECLAIMS, NODES

REASON_REPAIR_BLOCKED: Final = "NodeRepairBlocked"


def repair_blocked(node: Node, threshold: str, scope: str) -> Event:
    """Too many nodes in `scope` are unhealthy for the controller to repair `node`."""
    return Event(
        involved=involved(NODES, node),
        type=EventType.WARNING,
        reason=REASON_REPAIR_BLOCKED,
        message=f"more than {threshold} nodes are unhealthy in {scope}",
    )


def unhealthy_terminating(claim: NodeClaim, condition: str) -> Event:
    """The NodeClaim is deleted because its node's `condition` stayed unhealthy too long."""
    return Event(
        involved=involved(NODECLAIMS, claim),
        type=EventType.NORMAL,
        reason="DisruptionTerminating",
        message=f"Disrupting NodeClaim: Unhealthy (node condition {condition})",
    )
