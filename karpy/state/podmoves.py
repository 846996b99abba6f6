"""Which pod events move a pod onto or off a node: what wakes the lastPodEventTime stamper and
the disruption pass.

Kept apart from `karpy.state.pods` (pure predicates on a Pod, which `karpy.simulate` reads too)
because it works on informer events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from karpy.apis.kube.pod import Pod
from karpy.kube.watch import Event, EventType
from karpy.state.pods import is_terminal, is_terminating


def _active(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and not is_terminal(pod) and not is_terminating(pod)


def pod_moves(synced: Callable[[], bool]) -> Callable[[Event[Pod]], Iterable[str]]:
    """A watch's key function naming the node a pod was bound to or removed from.

    Informer events carry only the new object, so it remembers which pods it has seen running on
    which node: a pod newly seen bound is a bind, a known pod that finished, started terminating
    or was deleted is a removal. Pods listed before `synced()` are only remembered (the initial
    list is not an event on the node). The lastPodEventTime stamper and the disruption pass are
    woken by these moves.
    """
    placed: dict[str, str] = {}

    def keys(event: Event[Pod]) -> Iterable[str]:
        pod = event.item.obj
        uid = event.item.ref.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
        known = placed.get(uid)
        if event.type is not EventType.DELETED and _active(pod):
            node = pod.spec.node_name or ""
            placed[uid] = node
            changed = known != node
        else:
            placed.pop(uid, None)
            node = known or ""
            changed = known is not None
        return (node,) if changed and node and synced() else ()

    return keys
