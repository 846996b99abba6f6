"""Which informer events make the termination controller look at which Node.

The controller is keyed by Node name and only acts on Nodes being deleted that still carry
karpenter.sh/termination. A drain advances when pods leave, so a pod's change or deletion queues
the Node it ran on, if that Node is draining. The callbacks never block: they only hand a key to
`enqueue` (a `WorkQueue.add`).
"""

from __future__ import annotations

from collections.abc import Callable

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1 import labels as wk
from karpy.kube.watch import Event, EventType
from karpy.state.informers import Subscriber
from karpy.state.view import ClusterView


def terminating(node: Node) -> bool:
    """A Node the termination controller has work on."""
    return (
        node.metadata.deletion_timestamp is not None
        and wk.FINALIZER_TERMINATION in node.metadata.finalizers
    )


def node_subscriber(enqueue: Callable[[str], None]) -> Subscriber[Node]:
    """Queue a Node once it is being deleted with karpy's finalizer on it."""

    def on_event(event: Event[Node]) -> None:
        if event.type is not EventType.DELETED and terminating(event.item.obj):
            enqueue(event.item.ref.name)

    return on_event


def pod_subscriber(enqueue: Callable[[str], None], view: ClusterView) -> Subscriber[Pod]:
    """Queue the draining Node a pod changed or disappeared on."""

    def on_event(event: Event[Pod]) -> None:
        if event.type is EventType.ADDED:
            return
        node_name = event.item.obj.spec.node_name
        if not node_name:
            return
        node = view.node(node_name)
        if node is not None and terminating(node):
            enqueue(node_name)

    return on_event
