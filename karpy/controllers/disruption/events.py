"""The Events disruption records on the NodeClaims it disrupts and on their Nodes (as
Karpenter's disruption/events.go): the same reason on both, worded for each."""

from __future__ import annotations

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, EventType, involved
from karpy.kube.kinds import NODECLAIMS, NODES


def on_nodeclaim(claim: NodeClaim, reason: str, message: str) -> Event:
    """A disruption step (`reason`) on the NodeClaim; `message` speaks of a NodeClaim."""
    return Event(
        involved=involved(NODECLAIMS, claim), type=EventType.NORMAL, reason=reason, message=message
    )


def on_node(node: Node, reason: str, message: str) -> Event:
    """The same step on the NodeClaim's Node, its message speaking of the Node."""
    return Event(
        involved=involved(NODES, node),
        type=EventType.NORMAL,
        reason=reason,
        message=message.replace("NodeClaim", "Node"),
    )
