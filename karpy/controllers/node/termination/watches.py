"""Which informer events make the termination controller look at which Node.

The controller is keyed by Node name and only acts on Nodes being deleted that still carry
karpenter.sh/termination. A drain advances when pods leave, so a pod's change or deletion queues
the Node it ran on, if that Node is draining; a drained Node waits for its VolumeAttachments, so
an attachment's change or deletion queues its Node the same way. The key functions never block
and never do I/O: they run on the informer's stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import VolumeAttachment
from karpy.apis.v1 import labels as wk
from karpy.kube.watch import Event, EventType
from karpy.state.view import ClusterView


def terminating(node: Node) -> bool:
    """A Node the termination controller has work on."""
    return (
        node.metadata.deletion_timestamp is not None
        and wk.FINALIZER_TERMINATION in node.metadata.finalizers
    )


def terminating_node(event: Event[Node]) -> Iterable[str]:
    """A Node, once it is being deleted with karpy's finalizer on it."""
    if event.type is not EventType.DELETED and terminating(event.item.obj):
        return (event.item.ref.name,)
    return ()


def _draining(view: ClusterView, event: EventType, node_name: str | None) -> Iterable[str]:
    """`node_name`, when an object on it (a pod, a VolumeAttachment) changed or went while the
    node drains: what a drain or a volume wait is waiting for."""
    if event is EventType.ADDED or not node_name:
        return ()
    node = view.node(node_name)
    return (node_name,) if node is not None and terminating(node) else ()


def draining_node_of_pod(view: ClusterView) -> Callable[[Event[Pod]], Iterable[str]]:
    """The draining Node a pod changed or disappeared on."""
    return lambda event: _draining(view, event.type, event.item.obj.spec.node_name)


def draining_node_of_attachment(
    view: ClusterView,
) -> Callable[[Event[VolumeAttachment]], Iterable[str]]:
    """The draining Node a VolumeAttachment changed or disappeared on."""
    return lambda event: _draining(view, event.type, event.item.obj.spec.node_name)
