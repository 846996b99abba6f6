"""Which informer events make the lifecycle controller look at which NodeClaim.

The controller is keyed by NodeClaim name. A NodeClaim's own changes queue it; a Node's changes
queue the NodeClaim whose providerID the Node carries, because registration and initialization
wait on the Node (it joins, turns Ready, sheds its startup taints) and finalization waits for it
to go. The key functions never block and never do I/O: they run on the informer's stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from karpy.apis.kube.node import Node
from karpy.kube.watch import Event
from karpy.state.view import ClusterView


def claims_of_node(view: ClusterView) -> Callable[[Event[Node]], Iterable[str]]:
    """The NodeClaim(s) whose status.providerID is the changed Node's spec.providerID (an index
    lookup, not a scan: Nodes change with every heartbeat)."""

    def keys(event: Event[Node]) -> Iterable[str]:
        provider_id = event.item.obj.spec.provider_id
        if not provider_id:
            return ()
        return [
            claim.metadata.name
            for claim in view.nodeclaims_with_provider_id(provider_id)
            if claim.metadata.name
        ]

    return keys
