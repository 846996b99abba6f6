"""Whether a NodeClaim's Node is Ready.

Registration, initialization and finalization find a NodeClaim's Node in cluster state by
providerID (`ClusterView.nodes_with_provider_id`), never by name, because only the cloud knows
which machine joined as which Node; garbage collection asks whether it is Ready.
"""

from __future__ import annotations

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus


def node_ready(node: Node) -> bool:
    """Whether the Node's Ready condition is True (kubelet, or kwok, says it runs pods)."""
    return any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE for c in node.status.conditions
    )
