"""Finding the Node that belongs to a NodeClaim: the one whose spec.providerID is the NodeClaim's.

Registration, initialization and finalization all need it; the match is by providerID, never by
name, because only the cloud knows which machine joined as which Node.
"""

from __future__ import annotations

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODES


def node_ready(node: Node) -> bool:
    """Whether the Node's Ready condition is True (kubelet, or kwok, says it runs pods)."""
    return any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE for c in node.status.conditions
    )


async def nodes_with_provider_id(kube: KubeClient, provider_id: str) -> tuple[Node, ...]:
    """Every Node whose spec.providerID is `provider_id` (normally none or one).

    Side effect: one list of all Nodes.
    """
    listed = await kube.list(NODES)
    return tuple(item.obj for item in listed.items if item.obj.spec.provider_id == provider_id)
