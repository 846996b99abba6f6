"""Pods that will need a new home because their Node is going away, and the trigger for them.

When a Node is being deleted (drift, expiry, consolidation, a user's `kubectl delete node`), its
pods will be evicted and become pending. Karpenter does not wait for that: the provisioner
counts the reschedulable pods of deleting nodes as pending in the same batch, so replacement
capacity is launched while the node drains. A Node that starts deleting therefore triggers the
batcher too. So does a NodeClaim that is gone: the pods nominated to it (a launch that failed for
insufficient capacity or a NodeClass that is not Ready, a NodeClaim deleted by hand) are pending
again, and need not wait for some unrelated pod to change before they are tried again. Pure
predicates plus the provisioner's non-blocking watch key functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.watch import Event, EventType
from karpy.state.pods import is_reschedulable


def pods_of_deleting_nodes(nodes: Iterable[Node], pods: Sequence[Pod]) -> list[Pod]:
    """The reschedulable pods bound to nodes that are being deleted."""
    deleting = {n.metadata.name for n in nodes if n.metadata.deletion_timestamp is not None}
    if not deleting:
        return []
    return [p for p in pods if p.spec.node_name in deleting and is_reschedulable(p)]


def deleting_node(event: Event[Node]) -> Iterable[str]:
    """A key for a Node being deleted (its pods will be pending). Synchronous, non-blocking."""
    deleting = event.item.obj.metadata.deletion_timestamp is not None
    if event.type is not EventType.DELETED and deleting:
        return (f"node/{event.item.ref.uid}",)
    return ()


def deleted_nodeclaim(event: Event[NodeClaim]) -> Iterable[str]:
    """A key for a NodeClaim that is gone, so the pods that were nominated to it are scheduled
    again at once. Synchronous and non-blocking."""
    if event.type is EventType.DELETED:
        return (f"nodeclaim/{event.item.ref.uid}",)
    return ()
