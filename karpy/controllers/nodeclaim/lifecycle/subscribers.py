"""Which informer events make the lifecycle controller look at which NodeClaim.

The controller is keyed by NodeClaim name. A NodeClaim's own changes queue it; a Node's changes
queue the NodeClaim whose providerID the Node carries, because registration and initialization
wait on the Node (it joins, turns Ready, sheds its startup taints) and finalization waits for it
to go. The callbacks never block: they only hand a key to `enqueue` (a `WorkQueue.add`).
"""

from __future__ import annotations

from collections.abc import Callable

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.watch import Event, EventType
from karpy.state.informers import Subscriber
from karpy.state.view import ClusterView


def nodeclaim_subscriber(enqueue: Callable[[str], None]) -> Subscriber[NodeClaim]:
    """Queue a NodeClaim whenever it is added or changes (a deletion starts as a change)."""

    def on_event(event: Event[NodeClaim]) -> None:
        if event.type is not EventType.DELETED:
            enqueue(event.item.ref.name)

    return on_event


def node_subscriber(enqueue: Callable[[str], None], view: ClusterView) -> Subscriber[Node]:
    """Queue the NodeClaim(s) whose status.providerID is the changed Node's spec.providerID
    (an index lookup, not a scan: Nodes change with every heartbeat)."""

    def on_event(event: Event[Node]) -> None:
        provider_id = event.item.obj.spec.provider_id
        if not provider_id:
            return
        for nodeclaim in view.nodeclaims_with_provider_id(provider_id):
            if nodeclaim.metadata.name:
                enqueue(nodeclaim.metadata.name)

    return on_event
